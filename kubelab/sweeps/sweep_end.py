"""When a sweep is over before its budget runs out, and how it ended.

Pure functions of the ledger (`SweepState`) and the spec, so the rules read in one place:
too many failed trials, `max_duration`, Polyaxon's `stop_at`; and, at the end, Succeeded
when any trial completed with a result, else Failed with the last trial's reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubelab.sweeps.store import COMPLETE, FAILED, SUCCEEDED, TRIAL_FAILED, SweepState

if TYPE_CHECKING:
    from kubelab.sweeps.sweep_spec import SweepSpec


def limits_reached(state: SweepState, spec: SweepSpec, metric: str) -> tuple[str | None, str, bool] | None:
    """(status, reason, stop running trials) when a limit ends the sweep, else None.

    A None status means "judge by the results", once the running trials are stopped.
    """
    failed = [e for e in state.entries() if e.state == TRIAL_FAILED]
    limit = state.max_failed_trials
    if limit is not None and len(failed) > limit:
        return (
            FAILED,
            f"{len(failed)} trials failed, more than max_failed_trials ({limit}); last: {failed[-1].reason}",
            True,
        )
    if state.max_duration is not None and state.seconds() >= state.max_duration:
        return None, f"reached max_duration ({state.max_duration:g}s)", True
    reached = reached_stop_at(state, spec, metric)
    if reached is not None:
        return None, reached, True
    return None


def reached_stop_at(state: SweepState, spec: SweepSpec, metric: str) -> str | None:
    """Why the sweep ends early (Polyaxon's metric early stopping), or None."""
    target = spec.stop_at
    if target is None:
        return None
    maximize = spec.objective.direction == "maximize"
    for entry in state.entries():
        value = entry.value
        if entry.state != COMPLETE or value is None:
            continue
        if value >= target if maximize else value <= target:
            return f"trial {entry.number} reached stop_at ({metric}={value:.6g})"
    return None


def outcome(state: SweepState, why: str, metric: str) -> tuple[str, str]:
    """The final status and reason once the sweep is over for `why`."""
    entries = state.entries()
    complete = [e for e in entries if e.state == COMPLETE]
    if complete:
        return SUCCEEDED, f"{why}; {len(complete)} of {len(entries)} completed"
    last = next((e.reason for e in reversed(entries) if e.reason), "no trial ran")
    return FAILED, f"{why}, but no trial completed with a '{metric}' result; last: {last}"
