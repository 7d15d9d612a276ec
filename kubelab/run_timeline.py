"""A run's timeline: the spans of its states, from its history, for `kubelab show`.

The history holds every transition (a queued run's place in line changes often); the timeline
folds repeats of a state into one span, except `Running`, whose new reasons are news (another
attempt, a replica lost while the others go on, an elastic run that shrank or grew). A span that
follows `Preempted` is marked as a resume, so a reader sees when the run gave its GPUs up, for
whom, and when it came back; an elastic run's spans carry its size (replicas).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kubelab.records import PREEMPTED, RUNNING, TERMINAL, parse_iso


@dataclass(frozen=True)
class Span:
    state: str
    reason: str
    start: str  # ISO time, as the history writes it
    seconds: float | None  # None: the run is still in this state (or it is the end)
    resumed: bool = False
    replicas: int | None = None  # an elastic run's size during the span


def timeline(history: list[dict[str, Any]]) -> list[Span]:
    """The spans of a record's `history` (transitions with `state`, `reason` and `at`), oldest first."""
    starts: list[dict[str, Any]] = []
    for entry in history:
        last = starts[-1] if starts else None
        if (
            last
            and last["state"] == entry["state"]
            and (entry["state"] != RUNNING or last["reason"] == entry["reason"])
        ):
            continue
        starts.append(entry)
    spans = []
    for index, entry in enumerate(starts):
        following = starts[index + 1] if index + 1 < len(starts) else None
        seconds = None
        if following is not None and entry["state"] not in TERMINAL:
            seconds = max(0.0, parse_iso(following["at"]) - parse_iso(entry["at"]))
        resumed = entry["state"] == RUNNING and index > 0 and starts[index - 1]["state"] == PREEMPTED
        size = entry.get("replicas")
        size = size if isinstance(size, int) else None
        spans.append(Span(entry["state"], entry.get("reason") or "", entry["at"], seconds, resumed, size))
    return spans


def timeline_record(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The spans as the REST record carries them (`timeline`), for the experiment view to draw."""
    return [asdict(span) for span in timeline(history)]


def span_rows(spans: list[Span]) -> list[tuple[str, str]]:
    """(state, "time  duration  reason") rows; the time is the day's, UTC."""
    rows = []
    for span in spans:
        clock = span.start[11:19]
        took = f"{span.seconds:.1f}s" if span.seconds is not None else "-"
        label = f"{span.state} (resumed)" if span.resumed else span.state
        if span.replicas is not None:
            label += f" x{span.replicas}"
        rows.append((label, f"{clock}  {took:>7}  {span.reason}"))
    return rows
