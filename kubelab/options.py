"""Experiment options and TensorBoard requests: declared once for the CLI, the magics and REST.

`kubelab run`, `kubelab render` and `%%train` add the same flags with `add_experiment_options`
and lay them over a spec with `apply_options`; `kubelab tensorboard start`, `%tensorboard`
and `POST /kubelab/api/tensorboards` all go through `tensorboard_request`. A flag means
the same thing, with the same type and the same error, wherever it is typed.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubelab.elastic import parse_replicas
from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.gpu_share import parse_gpus
from kubelab.priorities import parse_priority
from kubelab.spec_schema import field_meta

TENSORBOARD_SOURCES = ("experiments", "sweep", "query", "project")


@dataclass(frozen=True)
class FormField:
    """How the sidebar's "Run as experiment" dialog shows an option (`kind` says how it is
    typed and sent: text, a whole number, a quantity, one of the field's `enum`, or params)."""

    key: str
    label: str
    kind: Literal["text", "integer", "quantity", "choice", "params"] = "text"
    placeholder: str = ""
    default: str = ""


@dataclass(frozen=True)
class ExperimentOption:
    """One experiment option: the spec field it sets and how each entry point spells it.

    The spec field (`field_reader.about`) says what it means, its JSON type and bounds; this adds the
    flag (`kubelab run`, `kubelab render`, `%%train`), the unit a whole number counts (for
    the error), how a repeated flag merges, and the sidebar's form field. The REST API takes
    the spec field itself, described by `spec_schema`.
    """

    path: str
    flag: str
    unit: str = ""
    short: str = ""
    metavar: str | None = None
    merge: Literal["set", "append", "params"] = "set"
    form: FormField | None = None
    convert: Callable[[str], Any] | None = None
    """An argparse type for a field its Python type does not describe (`--gpus 0.5`)."""

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    def argument(self) -> tuple[list[str], dict[str, Any]]:
        """`add_argument`'s names and keywords."""
        tp, meta = field_meta(self.path)
        schema = meta.get("schema", {})
        kwargs: dict[str, Any] = {"dest": self.dest, "help": meta.get("description")}
        if self.merge != "set":
            kwargs.update(action="append", default=[])
        if self.merge == "params":
            kwargs.update(type=param, help="a parameter value (repeatable)")
        elif self.merge == "append":
            kwargs["help"] += " (repeatable)"
        elif "enum" in schema:
            choices = tuple(schema["enum"])
            kwargs.update(type=one_of(choices), metavar="{" + ",".join(choices) + "}")
        elif self.convert is not None:
            kwargs["type"] = self.convert
        elif tp in (int, int | None):  # a whole number, or none given
            kwargs["type"] = counted(schema.get("minimum", 0), self.unit)
        if self.metavar:
            kwargs["metavar"] = self.metavar
        return [n for n in (self.short, self.flag) if n], kwargs

    def lay(self, spec: dict[str, Any], value: Any) -> None:
        """Put the option's value into `spec` (a mapping as a file gives it)."""
        *outer, last = self.path.split(".")
        target = spec
        for name in outer:
            target[name] = dict(target.get(name) or {})
            target = target[name]
        if self.merge == "params":
            params = dict(spec.get("params") or {})
            params.update(parse_params(value, typed=not spec.get("inputs")))
            spec["params"] = params
        elif self.merge == "append":
            target[last] = [*(target.get(last) or []), *value]
        else:
            target[last] = value


def text(key: str, label: str, placeholder: str = "") -> FormField:
    return FormField(key, label, "text", placeholder)


def gpu_amount(text: str) -> float:
    """An argparse type for `--gpus`: whole GPUs, or 1/n of one to share it (`--gpus 0.5`)."""
    amount, problem = parse_gpus(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return amount


def replica_count(text: str) -> int | str:
    """An argparse type for `--replicas`: a number, or MIN:MAX for an elastic run."""
    try:
        return parse_replicas(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def priority_value(text: str) -> str | int:
    """An argparse type for `--priority`: a name as given, or a whole number."""
    value: str | int = int(text) if text.strip().isdigit() else text
    problem = parse_priority(value)[1]
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


# The experiment options, in the order `--help` and the sidebar's dialog show them.
EXPERIMENT_OPTIONS = (
    ExperimentOption("name", "--name", form=text("name", "Name")),
    ExperimentOption(
        "resources.gpus",
        "--gpus",
        unit="GPUs",
        form=FormField("gpus", "GPUs", "integer", default="0"),
        convert=gpu_amount,
    ),
    ExperimentOption("resources.gpu_type", "--gpu-type", form=text("gpuType", "GPU type")),
    ExperimentOption("resources.cpu", "--cpu", form=FormField("cpu", "CPU", "quantity", "4 or 500m")),
    ExperimentOption("resources.memory", "--memory", form=FormField("memory", "Memory", "quantity", "16Gi")),
    ExperimentOption("image", "--image", form=text("image", "Image", "the notebook image")),
    ExperimentOption(
        "replicas",
        "--replicas",
        metavar="N|MIN:MAX",
        convert=replica_count,
        form=FormField("replicas", "Replicas", "integer", default="1"),
    ),
    ExperimentOption(
        "framework", "--framework", form=FormField("framework", "Framework", "choice", default="none")
    ),
    ExperimentOption(
        "params",
        "--param",
        short="-P",
        metavar="NAME=VALUE",
        merge="params",
        form=FormField("params", "Parameters", "params"),
    ),
    ExperimentOption("seed", "--seed", unit="", form=FormField("seed", "Seed", "integer", "random")),
    ExperimentOption("tags", "--tag", merge="append"),
    ExperimentOption(
        "priority",
        "--priority",
        metavar="{low,normal,high,N}",
        convert=priority_value,
        form=FormField("priority", "Priority", "text", "normal (low is preemptible)"),
    ),
)
# The spec field each option sets, so a bad option is reported as that field.
OPTION_FIELDS = {
    name: "param" if o.merge == "params" else o.path
    for o in EXPERIMENT_OPTIONS
    for name in (o.short, o.flag)
    if name
}


def counted(minimum: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum` (`--gpus -1` is refused here)."""

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            of = f" of {what}" if what else ""
            raise argparse.ArgumentTypeError(f"must be a whole number{of}, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        return value

    return convert


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse type that names the choices in its error, as spec validation does."""

    def convert(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(f"must be one of {', '.join(choices)}, not {text!r}")
        return text

    return convert


def param(text: str) -> tuple[str, str]:
    """An argparse type for `-P NAME=VALUE`: the pair, the value still text."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, not {text!r}")
    return name.strip(), value


def add_experiment_options(parser: argparse.ArgumentParser | Any) -> None:
    """The flags that describe an experiment (a parser or an argument group)."""
    for option in EXPERIMENT_OPTIONS:
        names, kwargs = option.argument()
        parser.add_argument(*names, **kwargs)


def given_options(args: argparse.Namespace) -> list[ExperimentOption]:
    """The experiment options a command line set."""
    return [o for o in EXPERIMENT_OPTIONS if getattr(args, o.dest) not in (None, [])]


def option_error(message: str) -> ValidationError | None:
    """argparse's "argument --gpus: REASON" as the error of the field the option sets, or None."""
    found = re.fullmatch(r"argument ([^:]+): (.*)", message, re.S)
    if not found:
        return None
    for name in found.group(1).split("/"):
        if name in OPTION_FIELDS:
            return ValidationError("invalid option", [FieldError(OPTION_FIELDS[name], found.group(2))])
    return None


def parse_params(pairs: list[tuple[str, str]], typed: bool = True) -> dict[str, Any]:
    """`-P lr=0.1 -P act=relu`. With `typed`, numbers and booleans are read as JSON reads
    them; without (the spec declares inputs), text is kept for the declared types to convert,
    so `-P name=007` stays "007" for a string input.
    """
    params: dict[str, Any] = {}
    for name, value in pairs:
        try:
            parsed = json.loads(value) if typed else value
        except ValueError:
            parsed = value
        params[name] = parsed if isinstance(parsed, (int, float, bool)) else value
    return params


def apply_options(spec: Mapping[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """`spec` with the experiment options laid over it; options left as None keep the spec's value."""
    result = dict(spec)
    for option in given_options(args):
        option.lay(result, getattr(args, option.dest))
    return result


def add_tensorboard_options(parser: argparse.ArgumentParser) -> None:
    """What a TensorBoard shows: experiment ids, `--sweep ID`, `--query PQL` or `--project`."""
    parser.add_argument("ids", nargs="*", metavar="ID", help="experiment ids")
    parser.add_argument("--sweep", help="every trial of a sweep")
    parser.add_argument("--query", "-q", help="experiments matching a PQL query")
    parser.add_argument("--project", action="store_true", help="every experiment")


def tensorboard_request(args: argparse.Namespace) -> dict[str, Any]:
    """The request body the options describe (checked as the server checks it)."""
    given = {
        "experiments": list(args.ids),
        "sweep": args.sweep,
        "query": args.query,
        "project": bool(args.project),
    }
    chosen = {k: v for k, v in given.items() if v}
    if len(chosen) != 1:  # said in flags, as the user typed them
        raise ValidationError(
            "nothing to show",
            [FieldError("", "give experiment ids, --sweep ID, --query PQL or --project (exactly one)")],
        )
    kind, value = tensorboard_source(chosen)
    return {kind: value}


def tensorboard_source(request: Any) -> tuple[str, Any]:
    """The one source a TensorBoard request names, as (kind, value), or a ValidationError."""
    if not isinstance(request, dict):
        raise ValidationError(
            "invalid TensorBoard request",
            [FieldError("", "must be a mapping with one of experiments, sweep, query or project")],
        )
    problems = [
        FieldError(str(k), "unknown field" + did_you_mean(str(k), TENSORBOARD_SOURCES))
        for k in request
        if k not in TENSORBOARD_SOURCES
    ]
    given = [k for k in TENSORBOARD_SOURCES if k in request and request[k] not in (None, False)]
    if not problems and len(given) != 1:
        problems.append(FieldError("", "give exactly one of experiment ids, sweep, query or project"))
    if problems:
        raise ValidationError("invalid TensorBoard request", problems)
    return given[0], request[given[0]]
