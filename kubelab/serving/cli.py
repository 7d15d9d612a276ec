"""`kubelab serve` and `kubelab service ls|show|logs|stop|delete`.

    kubelab serve RUN --model outputs/model.joblib [--name iris] [--version 2]
    kubelab serve --predictor serve:Model [--model weights.pt] [--folder src]
    kubelab serve --port 8081 -e REDIS_HOSTS=local:redis:6379 -- redis-commander --port {{ port }}
    kubelab serve -f service.yaml                      # kind: service, or a Polyaxon v1 service

`serve` waits until the service answers (or fails, with the reason) unless `--no-wait`. The
flags (also `%serve`'s, through `add_serve_options` and `serve_request`) overlay a file's fields.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kubelab.cli_output import emit, grid, say
from kubelab.command_group import CommandGroup
from kubelab.errors import FieldError, ValidationError
from kubelab.options import param

FAILED, RUNNING = "Failed", "Running"


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """The flags that describe a service, shared by `kubelab serve` and `%serve`."""
    p.add_argument("run", nargs="?", help="the run whose file --model names (a sweep: its best trial)")
    p.add_argument("-f", "--file", help="a service spec (kind: service) or a Polyaxon v1 service")
    p.add_argument("--model", help="the model file (in the run's folder when RUN is given)")
    p.add_argument("--predictor", help="a Python class module:Class with load() and predict()")
    p.add_argument("--name", help="the service's name (default: from the model or command)")
    p.add_argument("--version", help="the version (default 1)")
    p.add_argument("--folder", help="where it runs and imports from")
    p.add_argument("--replicas", type=int, help="replicas (local: processes)")
    p.add_argument("--port", type=int, action="append", help="a fixed port the command listens on")
    p.add_argument("--health-path", help="the path answering 200 when ready")
    p.add_argument("-e", "--env", action="append", type=param, default=[], metavar="NAME=VALUE")
    p.add_argument("--no-wait", action="store_true", help="return once started, not once answering")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND... an internal service")


def serve_request(args: argparse.Namespace) -> tuple[dict[str, Any], Path | None]:
    """The service spec mapping the flags (and `-f`) describe, and the folder paths are read from."""
    from kubelab.formats.detect import service_mapping
    from kubelab.formats.specfile import load_document

    data: dict[str, Any] = {}
    base = None
    if args.file:
        data = dict(service_mapping(load_document(args.file), args.file))
        base = Path(args.file).resolve().parent
    command = list(args.command or [])
    if command[:1] == ["--"]:
        command = command[1:]
    if command and args.run and not (args.model or args.predictor):  # `serve -- python -m ...`
        command, args.run = [args.run, *command], None
    if command:
        data["command"] = command
    if args.run and not args.model:
        raise ValidationError(
            "invalid service", [FieldError("model", "give --model: the run's file to serve")]
        )
    if args.model:
        data["model"] = {"path": args.model, **({"run": args.run} if args.run else {})}
    flags = {"predictor": args.predictor, "name": args.name, "version": args.version, "folder": args.folder}
    flags.update(health_path=args.health_path, replicas=args.replicas, ports=args.port)
    data.update({key: value for key, value in flags.items() if value is not None})
    if args.env:
        data["env"] = {**data.get("env", {}), **dict(args.env)}
    return data, base


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="serve a run's model (Open Inference Protocol), a predictor class, or any command",
        description="Start a service: a model over KServe's Open Inference Protocol (v2 REST) "
        "with MLServer, or an internal service (any command with a port). See docs/serving.md.",
    )
    serve.add_argument("-o", "--output", choices=("json",))
    add_serve_options(serve)
    serve.set_defaults(handler=cmd_serve)
    command = CommandGroup(
        subparsers, "service", help="list, inspect, follow, stop or delete services", description="Services."
    ).command
    command("ls", cmd_ls, "list services")
    command("show", cmd_show, "a service: state, URL, replicas and what it serves").add_argument("id")
    p = command("logs", cmd_logs, "a replica's output")
    p.add_argument("id")
    p.add_argument("--replica", type=int, default=0)
    command("stop", cmd_stop, "stop every replica of a service").add_argument("id")
    command("delete", cmd_delete, "stop a service and remove its record and logs").add_argument("id")
    p = command("traffic", cmd_traffic, "move or mirror traffic between a service's versions (Kubernetes)")
    p.add_argument("name")
    p.add_argument(
        "weights", nargs="*", metavar="VERSION=PERCENT", help="e.g. 2=10: the version not named gets the rest"
    )
    p.add_argument(
        "--mirror", action="append", default=[], metavar="VERSION=PERCENT", help="copy requests to a version"
    )


def _services() -> Any:
    from kubelab.serving.cluster import services

    return services()  # on the cluster where the backend has a namespace, else this machine's


def describe(view: dict[str, Any]) -> str:
    """One line: id, state, where it answers, and what it serves."""
    reason = f" ({view['reason']})" if view.get("reason") else ""
    return f"{view['id']}  {view['state']}{reason}  {view['url']}  serves {_serves(view)}"


def cmd_serve(args: argparse.Namespace) -> int:
    data, base = serve_request(args)
    services = _services()
    view = services.start(data, base_dir=base)
    if not args.no_wait:
        view = services.wait(view["id"])
    if args.output == "json":
        emit(view, "json")
    else:
        say(describe(view))
        if view["state"] == RUNNING and view["endpoint"]:
            say(f"  predict: POST {view['url']}{view['endpoint']}")
    return 1 if view["state"] == FAILED else 0


def cmd_ls(args: argparse.Namespace) -> int:
    views = _services().list()
    if args.output == "json":
        emit({"items": views}, "json")
    elif views:
        rows = [("ID", "STATE", "REPLICAS", "URL", "SERVES")]
        for view in views:
            ready = sum(r["state"] == "Ready" for r in view["replicas"])
            rows.append(
                (view["id"], view["state"], f"{ready}/{len(view['replicas'])}", view["url"], _serves(view))
            )
        say(grid(rows))
    return 0


def _serves(view: dict[str, Any]) -> str:
    lineage = view.get("lineage") or {}
    if lineage.get("file"):
        return f"{lineage['run']}:{lineage['file']}" if lineage.get("run") else str(lineage["file"])
    command = view["spec"].get("command")
    return str(lineage.get("predictor") or (command if isinstance(command, str) else " ".join(command)))


def cmd_show(args: argparse.Namespace) -> int:
    view = _services().get(args.id)
    if args.output == "json":
        emit(view, "json")
    else:
        say(describe(view))
        for replica in view["replicas"]:
            index, state, port = replica["index"], replica["state"], replica["port"]
            say(f"  replica {index}: {state} on port {port}, restarted {replica['restarts']} times")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    sys.stdout.write(_services().logs(args.id, args.replica))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    view = _services().stop(args.id)
    emit(view, "json") if args.output == "json" else say(describe(view))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    _services().delete(args.id)
    if args.output != "json":
        say(f"deleted {args.id}")
    return 0


def cmd_traffic(args: argparse.Namespace) -> int:
    views = _services().traffic(args.name, args.weights, args.mirror)
    if args.output == "json":
        emit({"items": views}, "json")
    else:
        say(
            grid(
                [
                    ("ID", "TRAFFIC", "MIRROR", "STATE"),
                    *((v["id"], f"{v['traffic']}%", f"{v['mirror']}%", v["state"]) for v in views),
                ]
            )
        )
    return 0
