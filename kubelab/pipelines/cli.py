"""`kubelab pipeline`: run and manage pipelines from a terminal.

    kubelab pipeline run -f pipeline.yml [-P k=v] [--wait] [--now] [-o json]
    kubelab pipeline ls | show ID | stop ID | resume ID [--wait]
    kubelab pipeline step ID STEP    (one step, as the driver runs it: an Argo task's command)

A spec with a `schedule:` section is not run at once: it becomes a schedule
(`kubelab schedule ls`), unless `--now` asks for one run now. Works with no server
running: the CLI starts the driver itself.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.cli_output import emit, grid, say
from kubelab.command_group import CommandGroup
from kubelab.options import param
from kubelab.progress import LiveStatus, pipeline_line
from kubelab.records import RUNNING, SUCCEEDED

if TYPE_CHECKING:
    from kubelab.pipelines.service import Pipelines


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = CommandGroup(
        subparsers,
        "pipeline",
        help="run or manage a pipeline of experiments and sweeps",
        description="Run a pipeline from a spec file, or manage pipelines.",
    ).command

    p = command("run", cmd_run, "run a pipeline (or create its schedule) from a spec file")
    p.add_argument("-f", "--file", required=True, help="a pipeline spec (YAML/JSON)")
    p.add_argument(
        "-P",
        "--param",
        action="append",
        type=param,
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline param (repeatable)",
    )
    p.add_argument("--wait", action="store_true", help="follow the steps; exit non-zero unless it succeeds")
    p.add_argument("--now", action="store_true", help="run once now, even if the spec has a schedule")
    command("ls", cmd_ls, "list pipelines")
    command("show", cmd_show, "show a pipeline and its steps").add_argument("id")
    command("stop", cmd_stop, "stop a pipeline and its running steps").add_argument("id")
    p = command("resume", cmd_resume, "run again the steps of a pipeline that did not succeed")
    p.add_argument("id")
    p.add_argument("--wait", action="store_true")
    p = command("step", cmd_step, "run one step of a pipeline (what an engine: argo Workflow's task runs)")
    p.add_argument("id")
    p.add_argument("step")


def _pipelines() -> Pipelines:
    from kubelab.experiments import Experiments
    from kubelab.pipelines.service import Pipelines

    return Pipelines(Experiments())


def read_spec(path: str) -> tuple[Any, Path]:
    from kubelab.sweeps.config_files import read_document

    data, origin = read_document(Path(path), "file")
    return data, (origin.parent if origin else Path.cwd())


def cmd_run(args: argparse.Namespace) -> int:
    from kubelab.formats.polyaxon_dag import translate
    from kubelab.options import parse_params

    data, base = read_spec(args.file)
    data = translate(data, base)  # a Polyaxon DAG (and its schedule) as a pipeline
    params = parse_params(args.param)
    if isinstance(data, dict) and data.get("schedule") is not None and args.now:
        from kubelab.errors import ValidationError
        from kubelab.schedules.spec import parse_schedule

        problems = parse_schedule(data["schedule"])[1]
        if problems:  # a bad schedule is refused even when it is not used
            raise ValidationError("invalid pipeline spec", problems)
        data = {k: v for k, v in data.items() if k != "schedule"}
    if isinstance(data, dict) and data.get("schedule") is not None:
        from kubelab.schedules.service import Schedules

        record = Schedules(_pipelines().lab).create("pipeline", data, base_dir=base, params=params)
        if args.output == "json":
            emit(record, "json")
        else:
            say(
                f"scheduled pipeline {record['name']} ({record['cron']} {record['timezone']}): "
                f"schedule {record['id']}, next at {record['next_at']}",
                file=sys.stderr,
            )
            say(record["id"])
        return 0
    pipelines = _pipelines()
    record = pipelines.create(data, base_dir=base, params=params)
    if not args.wait:
        if args.output == "json":
            emit(record, "json")
        else:
            say(f"started pipeline {record['id']} ({record['name']})", file=sys.stderr)
            say(record["id"])
        return 0
    return follow(pipelines, record["id"], args.output)


def follow(pipelines: Any, pipeline_id: str, output: str | None) -> int:
    """Print each step as it changes state; exit 0 only if the pipeline succeeded."""
    quiet = output == "json"
    seen: dict[str, tuple[str, str | None]] = {}
    with LiveStatus(enabled=not quiet) as live:
        while True:
            pipeline = pipelines.pipeline(pipeline_id)
            record = pipelines.record(pipeline)
            for step in record["steps"]:
                now = (step["state"], step["id"])
                if seen.get(step["name"]) != now and step["state"] != "waiting":
                    seen[step["name"]] = now
                    why = f" ({step['reason']})" if step["reason"] else ""
                    live.log(f"step {step['name']}: {step['state']} {step['kind']} {step['id'] or ''}{why}")
            live.update(*pipeline_line(pipeline_id, record["steps"]))
            if record["status"] != RUNNING:
                break
            pipelines.ensure_driver(pipeline)
            time.sleep(0.1)
    record = pipelines.get(pipeline_id)
    if quiet:
        emit(record, "json")
    else:
        say(f"pipeline {pipeline_id} {record['status']}: {record['reason']}", file=sys.stderr)
    return 0 if record["status"] == SUCCEEDED else 1


def cmd_ls(args: argparse.Namespace) -> int:
    records = _pipelines().list()
    if args.output == "json":
        emit({"items": records}, "json")
        return 0
    rows = [("ID", "NAME", "STATUS", "STEPS", "CREATED")]
    for r in records:
        done = r["counts"].get("succeeded", 0)
        rows.append((r["id"], r["name"][:30], r["status"], f"{done}/{len(r['steps'])}", r["created_at"]))
    say(grid(rows))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    record = _pipelines().get(args.id)
    if args.output == "json":
        emit(record, "json")
        return 0
    for key in ("id", "name", "status", "reason", "params", "created_at", "finished_at", "schedule"):
        say(f"{key + ':':13} {record.get(key)}")
    rows = [("STEP", "KIND", "STATE", "ID", "ATTEMPT", "DEPENDS ON", "REASON")]
    for s in record["steps"]:
        rows.append(
            (
                s["name"],
                s["kind"],
                s["state"] + (" (cached)" if s["cached"] else ""),
                s["id"] or "-",
                s["attempt"],
                ",".join(s["depends_on"]) or "-",
                s["reason"],
            )
        )
    say(grid(rows))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    record = _pipelines().stop(args.id)
    emit(record, "json") if args.output == "json" else say(
        f"pipeline {record['id']} {record['status']}: {record['reason']}"
    )
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    pipelines = _pipelines()
    record = pipelines.resume(args.id)
    if args.wait:
        return follow(pipelines, record["id"], args.output)
    emit(record, "json") if args.output == "json" else say(
        f"pipeline {record['id']} {record['status']}: {record['reason']}"
    )
    return 0


def cmd_step(args: argparse.Namespace) -> int:
    from kubelab.pipelines.step import StepRunner

    return StepRunner(_pipelines().pipeline(args.id), args.step).run()
