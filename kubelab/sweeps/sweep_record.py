"""A sweep as clients see it: counts, budget and best trial (importance: `importance.py`).

The REST API, the CLI, the event stream and the sidebar all show this one record
(`sweep_record`); a pipeline step reads a sweep's best trial from it too.
"""

from __future__ import annotations

from typing import Any

from kubelab.sweeps.store import (
    BUDGET_FIELDS,
    COMPLETE,
    INTERRUPTED,
    PRUNED,
    RUNNING,
    TRIAL_FAILED,
    TRIAL_STOPPED,
    SweepDirectory,
    SweepState,
)

COUNT_OF = {
    COMPLETE: "succeeded",
    TRIAL_FAILED: "failed",
    PRUNED: "pruned",
    TRIAL_STOPPED: "stopped",
    INTERRUPTED: "interrupted",
}
_SPECS: dict[str, dict[str, Any]] = {}  # sweep.json never changes: read each once


def configurations(sweep: SweepDirectory) -> int | None:
    """How many configurations a grid, bruteforce or batch sweep has (None for the others)."""
    from kubelab.sweeps.sweep_spec import SweepSpec

    spec = SweepSpec.parse(spec_of(sweep))
    if spec.batch is not None:
        return len(spec.batch)
    return spec.space.grid_size() if spec.tuner.kind.walks == "grid" else None


def spec_of(sweep: SweepDirectory) -> dict[str, Any]:
    key = str(sweep.path)
    if key not in _SPECS:
        _SPECS[key] = sweep.spec_data()
    return _SPECS[key]


def sweep_record(sweep: SweepDirectory, state: SweepState) -> dict[str, Any]:
    """The sweep as clients see it (REST, CLI, the event stream, the sidebar)."""
    spec = spec_of(sweep)
    objective = spec["objective"]
    counts = {"running": 0, "succeeded": 0, "failed": 0, "pruned": 0, "stopped": 0, "interrupted": 0}
    for entry in state.trials.values():
        counts[COUNT_OF.get(entry.state, "running")] += 1
    budget = {key: getattr(state, key) for key in BUDGET_FIELDS}
    if state.status == RUNNING:
        budget.update(sweep.pending_budget())  # asked for, and about to be taken by the driver
    return {
        "id": sweep.id,
        "name": spec.get("name") or sweep.id,
        "status": state.status,
        "reason": state.reason,
        "objective": {"metric": objective["metric"], "direction": objective["direction"]},
        "tuner": spec["tuner"]["name"],
        "early_stopping": spec["early_stopping"]["name"],
        **budget,
        "concurrency": spec["concurrency"],
        "counts": counts,
        "trials_started": state.counted(),  # what max_trials is measured against
        "finished": state.counted() - counts["running"],
        "best": best_trial(state, objective["direction"]),
        "created_at": state.created_at,
        "finished_at": state.finished_at,
        "duration": round(state.seconds(), 3),
        "user": state.user,
        "pipeline": state.pipeline,
        "pipeline_step": state.pipeline_step,
    }


def best_trial(state: SweepState, direction: str) -> dict[str, Any] | None:
    done = [(e.value, e) for e in state.entries() if e.state == COMPLETE and e.value is not None]
    if not done:
        return None
    sign = 1 if direction == "minimize" else -1
    _, best = min(done, key=lambda pair: (sign * pair[0], pair[1].number))
    return {"trial": best.number, "id": best.run_id, "value": best.value, "params": best.params}
