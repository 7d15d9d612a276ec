"""`kubelab schedule`: experiments, sweeps and pipelines on a timetable.

    kubelab schedule add -f spec.yml [-P k=v]     # any spec with a `schedule:` section
    kubelab schedule ls | pause ID | resume ID | rm ID
    kubelab schedule fire ID                      # once now, followed (a CronJob's command)
    kubelab schedule render -f spec.yml [--yaml]  # the CronJob and its ServiceAccount

`kubelab pipeline run -f` on a spec with a `schedule:` section does the same as `add`.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubelab.cli_output import emit, grid, say
from kubelab.command_group import CommandGroup
from kubelab.errors import FieldError
from kubelab.options import param
from kubelab.records import parse_iso

if TYPE_CHECKING:
    from kubelab.schedules.service import Schedules


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = CommandGroup(
        subparsers,
        "schedule",
        help="run experiments, sweeps or pipelines on a timetable",
        description="Create, list, pause, resume or remove schedules.",
    ).command

    p = command("add", cmd_add, "schedule the experiment, sweep or pipeline a spec file describes")
    p.add_argument("-f", "--file", required=True, help="a spec with a schedule: section")
    p.add_argument("-P", "--param", action="append", type=param, default=[], metavar="NAME=VALUE")
    command("ls", cmd_ls, "list schedules")
    command("pause", cmd_pause, "stop firing a schedule").add_argument("id")
    command("resume", cmd_resume, "fire a paused schedule again (from now on)").add_argument("id")
    command("rm", cmd_rm, "remove a schedule (what it started keeps running)").add_argument("id")
    command(
        "fire",
        cmd_fire,
        "fire a schedule once now and follow what it started to its end (what a schedule's CronJob runs)",
    ).add_argument("id")
    p = command(
        "render",
        cmd_render,
        "print the Kubernetes objects (CronJob, ServiceAccount, Role, "
        "RoleBinding) that run a schedule on the cluster",
    )
    p.add_argument("-f", "--file", required=True, help="a spec with a schedule: section")
    p.add_argument("--id", default="0000000000aa", help="the schedule id to render with")
    p.add_argument("--yaml", action="store_true", help="YAML instead of JSON")


def _schedules() -> Schedules:
    from kubelab.experiments import Experiments
    from kubelab.schedules.service import Schedules

    return Schedules(Experiments())


def cmd_add(args: argparse.Namespace) -> int:
    from kubelab.options import parse_params
    from kubelab.pipelines.cli import read_spec

    data, base = read_spec(args.file)
    record = _schedules().create(None, data, base_dir=base, params=parse_params(args.param))
    if args.output == "json":
        emit(record, "json")
    else:
        say(record["id"])
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    schedules = _schedules()
    from kubelab.schedules.process import ensure_running

    records = schedules.list()
    if any(not r["paused"] and r["fired_by"] == "scheduler" for r in records):
        ensure_running(schedules.lab.home)  # e.g. after a reboot: catch up now
    if args.output == "json":
        emit({"items": records}, "json")
        return 0
    rows = [("ID", "NAME", "KIND", "CRON", "TIMEZONE", "CONCURRENCY", "STATE", "NEXT", "LAST")]
    for r in records:
        last = r["fires"][-1] if r["fires"] else {}
        text = f"{last.get('state', '-')} {last.get('id') or ''}".strip()
        runs = (r.get("cluster") or {}).get("runs")
        if runs:  # on a cluster: the CronJob's latest Job
            text = f"{runs[-1]['state']} job/{runs[-1]['job']}"
        rows.append(
            (
                r["id"],
                r["name"][:30],
                r["kind"],
                r["cron"],
                r["timezone"],
                r["concurrency"],
                "paused" if r["paused"] else "active",
                r["next_at"] or "-",
                text,
            )
        )
    say(grid(rows))
    return 0


def describe_next(record: dict[str, Any]) -> str:
    """ "paused: ...", or the next fire in the schedule's own time zone (and UTC), or why none."""
    if record["paused"]:
        return f"paused: no fires until `kubelab schedule resume {record['id']}`"
    if not record.get("next_at"):
        return "active, but it fires no more (past its end)"
    from zoneinfo import ZoneInfo

    moment = datetime.fromtimestamp(parse_iso(record["next_at"]), ZoneInfo(record["timezone"]))
    local = moment.strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"active; next at {local} ({record['timezone']}; {record['next_at']})"


def _show(args: argparse.Namespace, record: dict[str, Any]) -> int:
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"schedule {record['id']} {describe_next(record)}")
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    return _show(args, _schedules().pause(args.id))


def cmd_resume(args: argparse.Namespace) -> int:
    return _show(args, _schedules().resume(args.id))


def cmd_rm(args: argparse.Namespace) -> int:
    _schedules().remove(args.id)
    if args.output == "json":
        emit({"id": args.id, "removed": True}, "json")
    else:
        say(f"removed schedule {args.id}")
    return 0


def cmd_fire(args: argparse.Namespace) -> int:
    """Fire now and follow: a CronJob's pod must live as long as what it started."""
    import sys
    import time

    from kubelab.schedules.scheduler import fire_once

    schedules = _schedules()
    fire = fire_once(schedules.lab.home, args.id)
    say(
        f"schedule {args.id}: {fire['state']} {fire.get('id') or ''} {fire.get('reason') or ''}".rstrip(),
        file=sys.stderr,
    )
    if fire["state"] != "started":
        return 0 if fire["state"] == "skipped" else 1
    kind = schedules.get_dir(args.id).definition()["kind"]
    while schedules.running(kind, fire["id"]):
        if kind == "pipeline":
            from kubelab.pipelines.service import Pipelines

            pipelines = Pipelines(schedules.lab)
            pipelines.ensure_driver(pipelines.pipeline(fire["id"]))
        elif kind == "sweep":
            from kubelab.sweeps.service import Sweeps

            sweeps = Sweeps(schedules.lab)
            sweeps.ensure_driver(sweeps.sweep(fire["id"]))
        else:
            schedules.lab.get(fire["id"])  # reconciles with the backend
        time.sleep(1.0)
    if args.output == "json":
        emit(fire, "json")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    import json

    from kubelab.backends.kubernetes import cronjob
    from kubelab.backends.kubernetes.notebook_env import NotebookEnv
    from kubelab.errors import ValidationError
    from kubelab.pipelines.cli import read_spec
    from kubelab.schedules.service import kind_of
    from kubelab.schedules.spec import parse_schedule

    data, _ = read_spec(args.file)
    schedule, problems = parse_schedule(data.get("schedule") if isinstance(data, dict) else None)
    if schedule is None:
        raise ValidationError("invalid schedule", problems or [FieldError("schedule", "is required")])
    name = (data.get("name") if isinstance(data, dict) else None) or kind_of(data)
    objects = cronjob.build(args.id, name, schedule, False, NotebookEnv.from_environ())
    if args.yaml:
        import yaml

        say(yaml.safe_dump_all(objects, sort_keys=False).rstrip())
    else:
        say(json.dumps(objects, indent=2))
    return 0
