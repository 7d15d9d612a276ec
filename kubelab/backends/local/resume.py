"""Resuming a preempted or stopped local run: where its metrics continue, and who took its GPUs.

When a run is preempted its trial saved a checkpoint (or not); the runner appends a marker
`{"resume": STEP, "restart": N}` to `metrics.jsonl` so every reader drops the points reported
after STEP before the preemption: the resumed trial reports them again, and charts, records and
TensorBoard show each step once (kubelab/records.py folds the markers).

A Stopped run is resumed the same way (`kubelab resume`, the sidebar, REST): the same run, its
folder, logs and metrics kept, started again with `KUBELAB_RESTART_COUNT` one higher, so a loop
that reads `kubelab.latest_checkpoint()` carries on from its last checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from kubelab.checkpoints import saved_checkpoints
from kubelab.errors import Conflict, FieldError
from kubelab.records import QUEUED, STOPPED, RunDirectory, Status, Transition, utcnow


def resume_point(run: RunDirectory, restart: int) -> int:
    """The step the run resumes after (its latest checkpoint, -1 for none), recorded in its metrics."""
    saved = saved_checkpoints(run.checkpoints_dir) if run.checkpoints_dir.is_dir() else []
    step = saved[-1][0] if saved else -1
    with open(run.metrics_file, "a") as handle:
        handle.write(json.dumps({"resume": step, "restart": restart}) + "\n")
    return step


def run_name(path: Path) -> str | None:
    """The name of the run a ledger key names; None when its folder is not ours to read."""
    try:
        name = RunDirectory(path).spec().get("name")
    except (OSError, ValueError):
        return None
    return name if isinstance(name, str) else None


def describe_run(key: str) -> str:
    """`name (id)` of the run a ledger key names, or its id when its folder is not ours to read."""
    path = Path(key)
    name = run_name(path)
    return f"{name} ({path.name})" if name and name != path.name else path.name


def reopen_stopped(run: RunDirectory) -> Status:
    """Take a Stopped run back to Queued (the one way out of an end) for a new runner to start.

    Removing its stop request is the claim: of two resumes at once, one removes the file and the
    other is refused, so a run never gets two runners. Pruned, failed and finished runs are refused.
    """
    status = run.status()
    if status.state != STOPPED:
        detail = f"run '{run.id}' is {status.state}: only a Stopped run can be resumed"
        raise Conflict(detail, [FieldError("status", f"is {status.state}, not {STOPPED}")])
    try:
        run.stop_file.unlink()
    except FileNotFoundError:
        raise Conflict(f"run '{run.id}' is already being resumed") from None
    status.restarts += 1
    step = resume_point(run, status.restarts)
    reason = f"resumed from step {step}" if step >= 0 else "resumed from the start (no checkpoint)"
    status.state, status.reason = QUEUED, reason
    status.exit_code = status.finished_at = status.runner_pid = status.runner_started = None
    status.replicas = []
    status.history.append(Transition(QUEUED, reason, utcnow()))
    run.write_status(status)
    return status
