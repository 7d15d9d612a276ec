"""Resuming a preempted local run: where its metrics continue, and who took its GPUs.

When a run is preempted its trial saved a checkpoint (or not); the runner appends a marker
`{"resume": STEP, "restart": N}` to `metrics.jsonl` so every reader drops the points reported
after STEP before the preemption: the resumed trial reports them again, and charts, records and
TensorBoard show each step once (kubelab/records.py folds the markers).
"""

from __future__ import annotations

import json
from pathlib import Path

from kubelab.checkpoints import saved_checkpoints
from kubelab.records import RunDirectory


def resume_point(run: RunDirectory, restart: int) -> int:
    """The step the run resumes after (its latest checkpoint, -1 for none), recorded in its metrics."""
    saved = saved_checkpoints(run.checkpoints_dir) if run.checkpoints_dir.is_dir() else []
    step = saved[-1][0] if saved else -1
    with open(run.metrics_file, "a") as handle:
        handle.write(json.dumps({"resume": step, "restart": restart}) + "\n")
    return step


def describe_run(key: str) -> str:
    """`name (id)` of the run a ledger key names, or its id when its folder is not ours to read."""
    path = Path(key)
    try:
        name = RunDirectory(path).spec().get("name")
    except (OSError, ValueError):
        name = None
    return f"{name} ({path.name})" if name and name != path.name else path.name
