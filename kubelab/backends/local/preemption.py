"""Who gives up GPUs when a more urgent run waits: the local ledger's preemption plan. Pure.

A run at the head of the machine's queue that cannot get its GPUs may take them from running
runs of lower priority that agreed to be preempted (`preemptible`). The plan frees as few
runs as it can, lowest priority first, then the newest (the one that has done least work):
the victims are marked in the ledger (`preemptions`), their runners see the mark, send their
processes SIGTERM, wait the run's grace period, free the GPUs and queue the run again. The
priorities are `kubelab.spec`'s (`low` 100, `normal` 1000, `high` 10000, or any int).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Holder = dict[str, Any]


def holders(state: dict[str, Any]) -> dict[str, list[tuple[str, Holder]]]:
    """run -> the (GPU index, holder) entries it holds, whole GPUs and shares alike."""
    held: dict[str, list[tuple[str, Holder]]] = {}
    for gpu, holder in state.get("allocations", {}).items():
        held.setdefault(holder["run"], []).append((gpu, holder))
    for gpu, sharers in (state.get("shares") or {}).items():
        for holder in sharers:
            held.setdefault(holder["run"], []).append((gpu, holder))
    return held


def plan(state: dict[str, Any], candidates: Iterable[int], want: float, priority: int, run: str) -> list[str]:
    """The runs to preempt so that `want` GPUs (or a 1/n share) fit on `candidates`; [] if none
    or if preempting every eligible run would still not make room."""
    names = [str(index) for index in candidates]
    held = holders(state)
    eligible = []
    for victim, entries in held.items():
        if victim == run or victim in (state.get("preemptions") or {}):
            continue
        first = entries[0][1]
        if not first.get("preemptible") or int(first.get("priority", 1000)) >= priority:
            continue
        if any(gpu in names for gpu, _ in entries):
            eligible.append((int(first.get("priority", 1000)), -float(first.get("since", 0)), victim))
    eligible.sort()
    chosen: list[str] = []
    for _, _, victim in eligible:
        chosen.append(victim)
        if _fits(state, names, want, set(chosen)):
            return chosen
    return []


def _fits(state: dict[str, Any], candidates: list[str], want: float, gone: set[str]) -> bool:
    allocations = {g: h for g, h in state.get("allocations", {}).items() if h["run"] not in gone}
    used: dict[str, float] = {}
    for gpu, sharers in (state.get("shares") or {}).items():
        used[gpu] = sum(h["share"] for h in sharers if h["run"] not in gone)
    if want < 1:
        return any(g not in allocations and used.get(g, 0.0) + want <= 1 + 1e-9 for g in candidates)
    free = [g for g in candidates if g not in allocations and used.get(g, 0.0) == 0]
    return len(free) >= want


def mark(state: dict[str, Any], victims: list[str], by: str, priority: int, now: float) -> None:
    """Record that `victims` must give their GPUs to `by` (a mark stays until the victim lets go)."""
    marks = state.setdefault("preemptions", {})
    for victim in victims:
        marks.setdefault(victim, {"by": by, "priority": priority, "since": now})


def forget(state: dict[str, Any], run: str) -> None:
    """`run` let go of its GPUs: its own mark goes; marks it made for itself stay until served."""
    (state.get("preemptions") or {}).pop(run, None)


def reclaim(state: dict[str, Any]) -> None:
    """Marks on runs that hold nothing any more (died, released) are dropped."""
    held = holders(state)
    marks = state.get("preemptions") or {}
    state["preemptions"] = {run: entry for run, entry in marks.items() if run in held}
