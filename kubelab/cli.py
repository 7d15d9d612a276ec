"""The `kubelab` command.

It works with no server running: it uses the same `Experiments` as the Jupyter server, and the
run directories are the shared record, so a server sees what the CLI started and the
other way round. `-o json` everywhere for scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from kubelab.cli_output import emit, say, table
from kubelab.errors import FieldError, KubelabError, ValidationError
from kubelab.options import add_experiment_options, apply_options, given_options, option_error
from kubelab.records import SUCCEEDED, RunDirectory
from kubelab.system_digest import summarize_file
from kubelab.system_metrics import describe

if TYPE_CHECKING:
    from kubelab.experiments import Experiments

Handler = Callable[[argparse.Namespace], int]
LS_DEFAULT = 50  # `kubelab ls` rows unless --all or --limit


def _lab() -> Experiments:
    from kubelab.experiments import Experiments

    return Experiments()


# -- spec from flags ----------------------------------------------------------------------


def add_spec_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--file",
        help="a spec file (kubelab YAML/JSON or a polyaxonfile; "
        "a Polyaxon group/matrix or an NNI config starts a sweep with run)",
    )
    add_experiment_options(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND... to run")


def spec_from_args(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    """The spec mapping the flags describe, and the folder its relative paths start from."""
    from kubelab.formats import load_spec_file

    base = Path.cwd()
    spec: dict[str, Any] = {}
    if args.file:
        spec = load_spec_file(args.file)
        base = Path(args.file).resolve().parent
        if spec.get("schedule") is not None:
            raise ValidationError(
                f"{args.file} has a schedule",
                [
                    FieldError(
                        "schedule",
                        "a scheduled experiment is added with `kubelab schedule add -f FILE`; "
                        "remove the section to run it once now",
                    )
                ],
            )
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if command:
        spec["command"] = command
    return apply_options(spec, args), base


# -- output -------------------------------------------------------------------------------


# -- commands -----------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    if args.file:
        from kubelab.formats import is_sweep
        from kubelab.formats.specfile import load_document

        data = load_document(args.file)
        if is_sweep(data):  # a Polyaxon group or matrix, an NNI config: many trials
            return run_sweep_file(args, data)
    spec, base = spec_from_args(args)
    lab = _lab()
    record = lab.submit(spec, base_dir=base)
    if args.output == "json" and not args.wait:
        emit(record, "json")
        return 0
    if args.output != "json":
        say(f"submitted {record['id']} ({record['name']})", file=sys.stderr)
    if not args.wait:
        say(record["id"])
        return 0
    from kubelab.progress import follow_run

    final = follow_run(lab, record["id"], show=args.output != "json")
    lab.backend.close()  # what follows a run's end (keeping its logs) finishes before we exit
    if args.output == "json":
        emit(final, "json")
    else:
        say(f"{final['id']} {final['status']}: {final['reason']}", file=sys.stderr)
    return 0 if final["status"] == SUCCEEDED else 1


def run_sweep_file(args: argparse.Namespace, data: Any) -> int:
    """`kubelab run -f` of a sweep document does what `kubelab sweep -f` does."""
    from kubelab.sweeps.cli import create_and_follow

    given = [o.short or o.flag for o in given_options(args)] + ["COMMAND"] * bool(args.command)
    if given:
        reason = f"{', '.join(given)} cannot be combined with a sweep file; edit the file instead"
        raise ValidationError("invalid arguments", [FieldError("file", reason)])
    return create_and_follow(data, Path(args.file).resolve().parent, args.wait, args.output)


def _replica(value: str) -> int | str:
    if value == "build" or value.isdigit():
        return value if value == "build" else int(value)
    raise argparse.ArgumentTypeError(f"must be a replica's number or build, not {value!r}")


def cmd_render(args: argparse.Namespace) -> int:
    from kubelab.backends.registry import make_backend
    from kubelab.experiments import Experiments

    spec_data, base = spec_from_args(args)
    backend = make_backend(args.backend, for_render=True, field="backend")
    lab = Experiments(backend=backend)
    spec = lab.prepare(spec_data, base_dir=base)
    objects = backend.render(spec, "<id>")
    if args.output == "yaml":
        import yaml

        say(yaml.safe_dump_all(objects, sort_keys=False).rstrip())
    else:
        emit(objects, "json")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    limit = None if args.all else args.limit if args.limit is not None else LS_DEFAULT
    items, total = _lab().list(" ".join(args.query), args.sort or "", limit)
    if args.output == "json":
        emit({"items": items, "total": total}, "json")
    else:
        params = [p.strip() for p in (args.params or "").split(",") if p.strip()]
        say(table(items, params))
        if total > len(items):
            say(f"({len(items)} of {total} shown, newest first; --all or --limit N for more)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    lab = _lab()
    record = lab.get(args.id)
    if args.output in ("json", "yaml"):
        emit(record, args.output)
        return 0
    from kubelab.show_layout import print_layout

    system = describe(summarize_file(RunDirectory(Path(record["run_dir"])).system_file))
    children = lab.list(f"parent:{record['id']}", "created_at")[0]
    print_layout(record, system, children)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    for chunk in _lab().logs(args.id, args.replica, follow=args.follow, timestamps=args.timestamps):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    record = _lab().stop(args.id)
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"stopping {args.id}")
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    _lab().delete(args.id)
    say(f"deleted {args.id}")
    return 0


def cmd_resources(args: argparse.Namespace) -> int:
    info = _lab().resources()
    if args.output == "json":
        emit(info, "json")
        return 0
    gpus = info["gpus"]
    say(f"backend: {info['backend']}")
    say(f"GPUs: {gpus['free']} free of {gpus['total']}")
    for kind in gpus.get("types", []):
        say(f"  {kind['type']}: {kind['free']}/{kind['total']} free")
    if gpus.get("queue"):
        say(f"waiting: {len(gpus['queue'])} experiment(s)")
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    from kubelab.launcher import launch_lab

    return launch_lab(port=args.port, open_browser=not args.no_browser, ip=args.ip, extra=args.extra)


class CommandParser(argparse.ArgumentParser):
    """Reports a bad experiment option as the spec field it sets (so `-o json` can carry it)."""

    def error(self, message: str) -> NoReturn:
        problem = option_error(message)
        if problem is not None:
            raise problem
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="kubelab", description="Train on GPUs from Jupyter.")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def command(
        name: str, handler: Handler, help: str, output: tuple[str, ...] = ("json",)
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        p.set_defaults(handler=handler)
        if output:
            p.add_argument("-o", "--output", choices=output)
        return p

    p = command("lab", cmd_lab, "start JupyterLab with kubelab on this machine", ())
    p.add_argument("--port", type=int, default=8888)
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--no-browser", action="store_true")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="-- further jupyter lab options")

    p = command("run", cmd_run, "submit an experiment")
    add_spec_flags(p)
    p.add_argument("--wait", action="store_true", help="follow it; exit non-zero unless it succeeds")

    p = command("render", cmd_render, "print what would be created, without creating it", ("json", "yaml"))
    add_spec_flags(p)
    p.add_argument(
        "--backend", default="local", help="local, kubernetes or an installed one (docs/architecture.md)"
    )

    p = command("ls", cmd_ls, "list experiments, optionally filtered by a PQL query")
    p.add_argument("query", nargs="*", help="e.g. status:succeeded, metrics.loss:<0.3")
    p.add_argument("--sort", help="e.g. -metrics.loss,created_at")
    p.add_argument("--limit", type=int, help=f"show N (default {LS_DEFAULT}, the newest)")
    p.add_argument("--all", action="store_true", help="show every match")
    p.add_argument("--params", help="parameter columns, e.g. lr,batch")

    p = command("show", cmd_show, "show one experiment", ("json", "yaml"))
    p.add_argument("id")
    p = command("logs", cmd_logs, "print an experiment's output", ())
    p.add_argument("id")
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument(
        "--replica", type=_replica, default=0, help="a replica's number, or build (init and environment)"
    )
    p.add_argument("--timestamps", action="store_true", help="start each line with its time (ISO 8601 UTC)")
    p = command("stop", cmd_stop, "stop an experiment")
    p.add_argument("id")
    p = command("rm", cmd_rm, "stop and delete an experiment and its run directory", ())
    p.add_argument("id")
    command("resources", cmd_resources, "GPUs and what waits for them")
    for extension in _extensions():
        extension(sub)
    return parser


def _extensions() -> list[Callable[[Any], None]]:
    """Subcommands that live with their domain (sweeps, pipelines, schedules, tensorboard, hub)."""
    from kubelab import repro_cli, usage
    from kubelab.environments import cli as environments
    from kubelab.pipelines import cli as pipelines
    from kubelab.schedules import cli as schedules
    from kubelab.serving import cli as serving
    from kubelab.sweeps import cli as sweeps
    from kubelab.tensorboard import cli as tensorboard

    found: list[Callable[[Any], None]] = [
        sweeps.register,
        pipelines.register,
        schedules.register,
        tensorboard.register,
        usage.register,
        environments.register,
        serving.register,
        repro_cli.register,
    ]
    try:  # the one adapter the core imports (pyproject's core contract names this import)
        from kubelab.spawner import cli as hub
    except ModuleNotFoundError as exc:  # a tree without the adapters' folders
        if exc.name not in ("kubelab.spawner", "kubelab.spawner.cli"):
            raise
    else:
        found.append(hub.register)
    return found


def dash_values(argv: list[str]) -> list[str]:
    """`--sort -metrics.loss` as `--sort=-metrics.loss`: argparse would read the value as an option."""
    if argv[:1] == ["tag"]:  # `kubelab tag RUN -old`: its edits begin with dashes too
        from kubelab.repro_cli import tag_words

        return tag_words(argv)
    out: list[str] = []
    for index, word in enumerate(argv):
        after_sort = bool(out) and out[-1] == "--sort" and "--" not in argv[:index]
        if after_sort and word.startswith("-") and len(word) > 1:
            out[-1] = f"--sort={word}"
        else:
            out.append(word)
    return out


def main(argv: list[str] | None = None) -> int:
    words = dash_values(sys.argv[1:] if argv is None else list(argv))
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(words)
        return int(args.handler(args))
    except KubelabError as exc:
        json_out = getattr(args, "output", None) == "json" if args else _asks_for_json(words)
        if json_out:
            say(json.dumps(exc.to_json(), indent=2), file=sys.stderr)
        else:
            say(f"kubelab: {exc.message()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _asks_for_json(words: list[str]) -> bool:
    """`-o json` on a line argparse refused (so there is no Namespace to ask)."""
    pairs = zip(words, words[1:], strict=False)
    return any(a in ("-o", "--output") and b == "json" for a, b in pairs) or "--output=json" in words


if __name__ == "__main__":
    sys.exit(main())
