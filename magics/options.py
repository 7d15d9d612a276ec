"""Option parsing for the magics: argparse that reports errors instead of exiting the kernel.

Every mistake becomes an `OptionError` (an IPython `UsageError`: shown without a traceback)
carrying the offending option and the magic's usage, raised before anything is submitted.
IPython has already expanded `$var` and `{expr}` in the line, so `--gpus $n` arrives as a number.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from IPython.core.error import UsageError

from kubelab.errors import ValidationError, did_you_mean
from kubelab.options import (
    add_experiment_options,
    add_tensorboard_options,
    counted,
)
from kubelab.options import tensorboard_request as shared_tensorboard_request
from kubelab.sweeps.pruners import PRUNER_KINDS
from kubelab.sweeps.tuner_catalog import TUNER_KINDS

PRUNERS = tuple(name for name in PRUNER_KINDS if name != "none")  # --early-stop is "on" already


OptionError = UsageError  # IPython shows exactly UsageError (not subclasses) without a traceback


class _HelpShown(Exception):
    pass


class MagicParser(argparse.ArgumentParser):
    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=False)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise OptionError(f"%{self.prog}: {message}\n{self.format_usage().rstrip()}")

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        if status:
            self.error(message or "invalid options")
        raise _HelpShown

    def read(self, line: str) -> argparse.Namespace | None:
        """Parse a magic's line; None when it asked for `-h` (the help is printed)."""
        try:
            words = shlex.split(line, posix=True)
        except ValueError as exc:  # an unclosed quote
            self.error(f"cannot read the options: {exc}")
        try:
            args, unknown = self.parse_known_args(words)
        except _HelpShown:
            return None
        if unknown:
            word = unknown[0]
            if word.startswith("-"):
                name = word.split("=", 1)[0]
                hint = did_you_mean(name, [o for a in self._actions for o in a.option_strings])
                self.error(f"unknown option {name}{hint}")
            self.error(f"unexpected argument {word!r}")
        return args


def train_parser(prog: str = "train") -> MagicParser:
    p = MagicParser(prog, "Run the cell (or a spec file) as a kubelab experiment, or as a sweep.")
    p.add_argument("-f", "--file", help="a spec file (line magic only)")
    add_experiment_options(p)  # the same flags, types and errors as `kubelab run`
    when = p.add_mutually_exclusive_group()
    when.add_argument("--wait", action="store_true", help="block until it ends; print the result")
    when.add_argument("--detach", action="store_true", help="return at once, without a live view")
    p.add_argument("--tensorboard", action="store_true", help="open TensorBoard under the cell")
    sweep = p.add_argument_group("sweep")
    sweep.add_argument("--sweep", metavar="SPACE", help="a search space: a file, or inline JSON/YAML")
    sweep.add_argument("--tuner", help=f"{', '.join(TUNER_KINDS)} (default tpe)")
    sweep.add_argument("--trials", type=counted(1, "trials"), help="the most trials to run")
    sweep.add_argument("--concurrency", type=counted(1, "trials"), help="trials at once")
    sweep.add_argument("--objective", help="the metric to optimize (default: the final value)")
    direction = sweep.add_mutually_exclusive_group()
    direction.add_argument("--maximize", action="store_true")
    direction.add_argument("--minimize", action="store_true")
    sweep.add_argument(
        "--early-stop",
        dest="early_stop",
        nargs="?",
        const="median",
        choices=PRUNERS,
        help="prune weak trials early (median by default)",
    )
    return p


SWEEP_ONLY = ("tuner", "trials", "concurrency", "objective", "maximize", "minimize", "early_stop")


def check_train(parser: MagicParser, args: argparse.Namespace, cell: bool) -> None:
    """Cross-option rules argparse cannot say."""
    if cell and args.file:
        parser.error("-f/--file is for the line magic %train; in a cell, the cell is the script")
    if not cell and not args.file:
        parser.error("give a spec file with -f (or use %%train as a cell magic)")
    if not args.sweep:
        for name in SWEEP_ONLY:
            if getattr(args, name) not in (None, False):
                parser.error(f"--{name.replace('_', '-')} needs --sweep SPACE")


def sweep_parser() -> MagicParser:
    p = MagicParser("sweep", "Run a sweep from a kubelab sweep file or an NNI config.")
    p.add_argument("-f", "--file", required=True, help="kubelab sweep YAML/JSON or NNI config.yml")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--wait", action="store_true")
    when.add_argument("--detach", action="store_true")
    return p


def experiments_parser() -> MagicParser:
    p = MagicParser("experiments", "List experiments, optionally filtered by a PQL query.")
    p.add_argument("query", nargs="*", help="e.g. status:succeeded metrics.loss:<0.3")
    p.add_argument("--sort", default="", help="e.g. -metrics.loss,created_at")
    p.add_argument("--limit", type=counted(1, "rows"), default=50)
    return p


def logs_parser() -> MagicParser:
    p = MagicParser("logs", "Print an experiment's output.")
    p.add_argument("id")
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("--replica", type=counted(0, "replicas"), default=0)
    return p


def id_parser(prog: str, description: str) -> MagicParser:
    p = MagicParser(prog, description)
    p.add_argument("id")
    return p


def tensorboard_parser() -> MagicParser:
    p = MagicParser("tensorboard", "Open TensorBoard for experiments, a sweep, a query or the project.")
    add_tensorboard_options(p)  # as `kubelab tensorboard start`; one id may also be a sweep's
    p.add_argument("--height", type=counted(100, "pixels"), default=640)
    return p


def tensorboard_request(parser: MagicParser, args: argparse.Namespace) -> dict[str, Any]:
    """The request `kubelab tensorboard start` would send; a mistake is reported as a usage error."""
    try:
        return shared_tensorboard_request(args)
    except ValidationError as exc:
        parser.error("; ".join(f.reason for f in exc.fields) or exc.detail)
        raise  # not reached: error() raises
