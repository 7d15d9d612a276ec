"""`kubelab sweep`: run and manage hyperparameter sweeps from a terminal.

    kubelab sweep -f sweep.yml [--wait] [-o json]     # kubelab, NNI (v2/v1) or Polyaxon (group, matrix)
    kubelab sweep ls | show ID | stop ID | resume ID [--max-trials N] [--max-duration 2h]

Works with no server running: the CLI starts the sweep's driver itself, and the server
(or a later `kubelab sweep ls`) finds it through `$KUBELAB_HOME/sweeps/`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubelab.sweeps.service import Sweeps

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from kubelab.cli_output import emit, grid, say
from kubelab.command_group import CommandGroup
from kubelab.progress import LiveStatus, sweep_line
from kubelab.records import RUNNING, SUCCEEDED
from kubelab.sweeps.file_events import NAMES, FileEvents


def register(subparsers: Any) -> None:
    group = CommandGroup(
        subparsers,
        "sweep",
        help="run or manage a hyperparameter sweep",
        required=False,
        description="Run a sweep from a spec file (kubelab or NNI config), or manage sweeps.",
    )
    parser, command = group.parser, group.command
    parser.set_defaults(handler=cmd_create)
    parser.add_argument(
        "-f", "--file", help="a sweep spec (YAML/JSON), an NNI config or a Polyaxon group/matrix"
    )
    parser.add_argument(
        "--wait", action="store_true", help="follow the trials; exit non-zero unless the sweep succeeds"
    )

    command("ls", cmd_ls, "list sweeps")
    command("show", cmd_show, "show a sweep: best trial, trials, parameter importance").add_argument("id")
    p = command("stop", cmd_stop, "stop a sweep and its running trials")
    p.add_argument("id")
    p = command("resume", cmd_resume, "resume a stopped or finished sweep, optionally with a larger budget")
    p.add_argument("id")
    p.add_argument("--max-trials", type=int)
    p.add_argument("--max-duration", help="e.g. 3600, 30m or 2h")
    p.add_argument("--wait", action="store_true")


def _sweeps() -> Sweeps:
    from kubelab.experiments import Experiments
    from kubelab.sweeps.service import Sweeps

    return Sweeps(Experiments())


def cmd_create(args: argparse.Namespace) -> int:
    from kubelab.errors import FieldError, ValidationError
    from kubelab.sweeps.config_files import read_document

    if not args.file:
        raise ValidationError(
            "nothing to run",
            [FieldError("file", "give a sweep spec with -f FILE, or a command: ls, show, stop, resume")],
        )
    start_early()  # Optuna and the runners import beside the CLI's own start
    data, origin = read_document(Path(args.file), "file")
    base = origin.parent if origin else Path.cwd()
    if isinstance(data, dict) and data.get("schedule") is not None:
        raise ValidationError(
            f"{args.file} has a schedule",
            [
                FieldError(
                    "schedule",
                    "a scheduled sweep is added with `kubelab schedule add -f FILE`; "
                    "remove the section to run it once now",
                )
            ],
        )
    return create_and_follow(data, base, args.wait, args.output)


def start_early() -> None:
    """About to create a sweep: a warm driver starts importing Optuna now, beside the CLI reading
    and checking the spec, and takes the sweep once recorded (`driver.launch`); the local
    backend's warm runners start with it, ready for the first trials. The driver's keeper is
    this CLI, so one never handed a sweep (a refused spec) leaves with it."""
    from kubelab.backends.registry import DEFAULT, VARIABLE
    from kubelab.home import default_home
    from kubelab.warm import DRIVER, RUNNER, WarmPool

    if DRIVER.size():
        WarmPool(default_home(), DRIVER).top_up(keeper=os.getpid())
        if (os.environ.get(VARIABLE) or DEFAULT) == "local":
            WarmPool(default_home(), RUNNER).top_up()  # what the driver's start would do, later


def create_and_follow(data: Any, base: Path, wait: bool, output: str | None) -> int:
    """Create a sweep from a document (also `kubelab run -f` of one); print it or follow it."""
    sweeps = _sweeps()
    record = sweeps.create(data, base_dir=base)
    if not wait:
        if output == "json":
            emit(record, "json")
        else:
            say(f"started sweep {record['id']} ({record['name']})", file=sys.stderr)
            say(record["id"])
        return 0
    return follow(sweeps, record["id"], output)


FAST_POLL, FAST_FOR = 0.005, 1.0  # a stat this often for a second after the state changed
SLOW_POLL = 0.1  # else; the state is read at least this often in any case
DRIVER_CHECK = 1.0  # seconds between checks that the sweep still has a live driver


def follow(sweeps: Any, sweep_id: str, output: str | None) -> int:
    """Print each trial as it ends, then the best trial; exit 0 only if the sweep succeeded.

    Between changes of the sweep's state a look is one `stat`; the final record has no
    parameter importance (`kubelab sweep show` computes it): following a sweep imports
    neither Optuna nor what its importance evaluators would.
    """
    quiet = output == "json"
    if not quiet:
        say(f"sweep {sweep_id}: following (Ctrl-C stops following, not the sweep)", file=sys.stderr)
    sweep = sweeps.sweep(sweep_id)
    objective = sweep.spec_data().get("objective") or {}
    metric, direction = objective.get("metric", "default"), objective.get("direction", "minimize")
    told = {e.number for e in sweep.read_state().entries() if e.final}
    stamp: tuple[int, int] | None = None
    changed = read = checked = time.monotonic()
    with LiveStatus(enabled=not quiet) as live, FileEvents() as events:
        watching = events.watch(sweep.path, NAMES)  # the state file replaced: wake at once
        while True:
            now = time.monotonic()
            look = state_stamp(sweep.state_file)
            if look is None:
                sweeps.sweep(sweep_id)  # deleted meanwhile: NotFound
            if look != stamp or now - read >= SLOW_POLL:
                if look != stamp:
                    stamp, changed = look, now
                read = now
                state = sweep.read_state()
                for entry in state.entries():
                    if entry.final and entry.number not in told:
                        told.add(entry.number)
                        live.log(trial_text(entry))
                line = sweep_line(
                    sweep_id, state.entries(), state.max_trials, state.seconds(), metric, direction
                )
                live.update(*line)
                if state.status != RUNNING:
                    break
            if now - checked >= DRIVER_CHECK:
                checked = now
                sweeps.ensure_driver(sweeps.sweep(sweep_id))
            if watching:
                events.wait(SLOW_POLL)
            else:
                time.sleep(FAST_POLL if now - changed < FAST_FOR else SLOW_POLL)
    record = sweeps.get(sweep_id, with_importance=False)
    if quiet:
        emit(record, "json")
    else:
        say(f"sweep {sweep_id} {record['status']}: {record['reason']}", file=sys.stderr)
        describe_best(record)
    return 0 if record["status"] == SUCCEEDED else 1


def trial_text(entry: Any) -> str:
    value = "" if entry.value is None else f" {entry.value:.6g}"
    why = f" ({entry.reason})" if entry.reason else ""
    params = " ".join(f"{k}={v}" for k, v in entry.params.items())
    return f"trial {entry.number}: {entry.state}{value}{why} {params}"


def state_stamp(path: Path) -> tuple[int, int] | None:
    """Changes whenever the state file is replaced (a new inode), even within one clock tick."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return info.st_ino, info.st_mtime_ns


def describe_best(record: dict[str, Any]) -> None:
    best = record.get("best")
    metric = record["objective"]["metric"]
    if best:
        params = " ".join(f"{k}={v}" for k, v in best["params"].items())
        say(f"best: trial {best['trial']} ({best['id']}) {metric}={best['value']:.6g} {params}")
    else:
        say("best: none yet")


def cmd_ls(args: argparse.Namespace) -> int:
    records = _sweeps().list()
    if args.output == "json":
        emit({"items": records}, "json")
        return 0
    rows = [("ID", "NAME", "STATUS", "TUNER", "TRIALS", "BEST")]
    for r in records:
        c = r["counts"]
        trials = f"{r['finished']}/{r['max_trials'] or '-'}"
        if c["running"]:
            trials += f" ({c['running']} running)"
        best = r["best"]
        shown = f"{r['objective']['metric']}={best['value']:.4g} (#{best['trial']})" if best else ""
        rows.append((r["id"], r["name"][:30], r["status"], r["tuner"], trials, shown))
    say(grid(rows))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    record = _sweeps().get(args.id)
    if args.output == "json":
        emit(record, "json")
        return 0
    metric = record["objective"]["metric"]
    for key in (
        "id",
        "name",
        "status",
        "reason",
        "tuner",
        "early_stopping",
        "max_trials",
        "concurrency",
        "created_at",
        "finished_at",
    ):
        say(f"{key + ':':16} {record.get(key)}")
    say(f"{'objective:':16} {record['objective']['direction']} {metric}")
    say(f"{'counts:':16} " + ", ".join(f"{k} {v}" for k, v in record["counts"].items()))
    describe_best(record)
    if record["importance"]:
        ranked = sorted(record["importance"].items(), key=lambda kv: -kv[1])
        scores = ", ".join(f"{name} {score:.2f}" for name, score in ranked)
        say(f"importance ({record['importance_evaluator']}): {scores}")
    pbt = any(t.get("lineage") for t in record["trials"])  # PBT: each member's generation and parent
    rows = [("TRIAL", "ID", "RESULT", metric.upper(), "PARAMS", "REASON", *(("LINEAGE",) if pbt else ()))]
    for t in record["trials"]:
        value = "" if t["objective"] is None else f"{t['objective']:.6g}"
        row = (t["trial"], t["id"] or "-", t["result"], value, t.get("params"), t["result_reason"])
        rows.append((*row, describe_lineage(t.get("lineage"))) if pbt else row)
    say(grid(rows))
    return 0


def describe_lineage(lineage: dict[str, Any] | None) -> str:
    """`g2 from #3 at step 20 (exploited)`: a PBT member's generation and what it went on from."""
    if not lineage:
        return ""
    if lineage.get("parent") is None:
        return f"g{lineage['generation']}"
    copied = " (exploited)" if lineage.get("exploited") else ""
    return f"g{lineage['generation']} from #{lineage['parent']} at step {lineage['start_step']}{copied}"


def cmd_stop(args: argparse.Namespace) -> int:
    record = _sweeps().stop(args.id)
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"sweep {record['id']} {record['status']}: {record['reason']}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    budget = {
        k: v
        for k, v in (("max_trials", args.max_trials), ("max_duration", args.max_duration))
        if v is not None
    }
    sweeps = _sweeps()
    record = sweeps.resume(args.id, budget)
    if args.wait:
        return follow(sweeps, record["id"], args.output)
    if args.output == "json":
        emit(record, "json")
    else:
        say(f"sweep {record['id']} {record['status']}: {record['reason']}")
    return 0
