"""What the sweep driver knows about one trial it follows: its new metric points, and its
result once its run has ended.

A look at a quiet trial costs one `stat` (the metrics file has not grown); otherwise only
the bytes added since the last look are read, and a torn last line waits for the next one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from kubelab import records
from kubelab.errors import did_you_mean
from kubelab.records import RunDirectory
from kubelab.sweeps.store import COMPLETE, PRUNED, TRIAL_FAILED, TRIAL_STOPPED, TrialEntry


@dataclass
class Follow:
    """What the driver knows about one trial it is following."""

    entry: TrialEntry
    run: RunDirectory
    status_stamp: int | None = None
    offset: int = 0
    last_value: Any = None
    metrics_seen: frozenset[str] = frozenset()
    checked_at: float = 0.0
    metrics_size: int = 0
    started: bool = False  # its process runs (or ran): asking ahead now no longer slows its start


def new_points(follow: Follow) -> list[dict[str, Any]]:
    """Rank 0's complete `metrics.jsonl` lines written since the last look (the objective is
    rank 0's); moves `follow`'s offset past them."""
    from kubelab.logfiles import read_from

    try:
        size = follow.run.metrics_file.stat().st_size
    except FileNotFoundError:
        return []
    if size == follow.metrics_size:
        return []  # nothing new: a stat instead of an open and a read
    follow.metrics_size = size
    text, offset = read_from(follow.run.metrics_file, follow.offset)
    if not text:
        return []
    complete = text[: text.rfind("\n") + 1]  # a torn last line waits for the next look
    follow.offset = offset - len(text.encode()) + len(complete.encode())
    points = []
    for line in complete.splitlines():
        try:
            point = json.loads(line)
        except ValueError:
            continue
        if point.get("replica") in (None, 0):
            points.append(point)
    return points


def trial_result(follow: Follow, status: Any, metric: str) -> tuple[str, float | None, str]:
    """(trial state, objective value, reason) for a trial whose run ended with `status`."""
    entry, n = follow.entry, follow.entry.number
    if status.state == records.SUCCEEDED:
        value = follow.last_value
        if value is None:
            return TRIAL_FAILED, None, unreported(follow, metric)
        if not math.isfinite(value):
            return TRIAL_FAILED, None, f"trial {n} reported a non-finite '{metric}' ({value})"
        return COMPLETE, float(value), ""
    if status.state == records.PRUNED:
        return PRUNED, None, entry.reason or f"trial {n} was pruned"
    if status.state == records.STOPPED:
        return TRIAL_STOPPED, None, f"trial {n} was stopped: {status.reason}"
    return TRIAL_FAILED, None, f"trial {n} failed: {status.reason}"


def unreported(follow: Follow, metric: str) -> str:
    """Why a succeeded trial has no result: it never reported `metric` (and what it did report)."""
    reason = f"trial {follow.entry.number} finished without reporting '{metric}'"
    seen = sorted(follow.metrics_seen)
    if seen:
        reason += f" (it reported {', '.join(seen)}{did_you_mean(metric, seen)})"
    return reason
