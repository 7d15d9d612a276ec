"""Who gives up GPUs when a more urgent run waits: the local ledger's preemption plan. Pure.

A run at the head of the machine's queue that cannot get its GPUs may take them from running
runs of lower priority that agreed to be preempted (`preemptible`). The plan frees as few
runs as it can, lowest priority first, then the newest (the one that has done least work):
the victims are marked in the ledger (`preemptions`), their runners see the mark, send their
processes SIGTERM, wait the run's grace period, free the GPUs and queue the run again. The
priorities are `kubelab.spec`'s (`low` 100, `normal` 1000, `high` 10000, or any int).

An elastic run above its `min` replicas gives up replicas before it is preempted whole: its
ledger entries name each GPU's replica, the plan takes its last replicas' GPUs first, and the
mark then lists the GPUs (`gpus`) its runner frees by retiring those replicas while the others
go on (kubelab/backends/local/resizing.py).
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


def spare(entries: list[tuple[str, Holder]]) -> list[list[str]]:
    """An elastic run's GPUs above its `min` replicas, a replica's at a time, its last one first."""
    if "replica" not in entries[0][1]:
        return []
    by_replica: dict[int, list[str]] = {}
    for gpu, holder in entries:
        by_replica.setdefault(int(holder.get("replica", 0)), []).append(gpu)
    order = sorted(by_replica, reverse=True)
    keep = int(entries[0][1].get("min_replicas", 1))
    return [sorted(by_replica[replica]) for replica in order[: max(0, len(order) - keep)]]


Takes = dict[str, list[str] | None]  # victim -> the GPUs it gives up (None: all, it stops)


def plan(state: dict[str, Any], candidates: Iterable[int], want: float, priority: int, run: str) -> Takes:
    """What to take so that `want` GPUs (or a 1/n share) fit on `candidates`: whole runs, or an
    elastic run's spare replicas; {} if none or if taking all that is eligible would not make room."""
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
    chosen: Takes = {}
    for _, _, victim in eligible:
        given: list[str] = []
        for piece in spare(held[victim]):  # shrinking is cheaper than stopping: tried first
            given += piece
            chosen[victim] = list(given)
            if _fits(state, names, want, chosen):
                return chosen
        chosen[victim] = None
        if _fits(state, names, want, chosen):
            return chosen
    return {}


def _fits(state: dict[str, Any], candidates: list[str], want: float, taken: Takes) -> bool:
    def kept(gpu: str, holder: Holder) -> bool:
        given = taken.get(holder["run"], [])
        return given is not None and gpu not in given

    allocations = {g: h for g, h in state.get("allocations", {}).items() if kept(g, h)}
    used: dict[str, float] = {}
    for gpu, sharers in (state.get("shares") or {}).items():
        used[gpu] = sum(h["share"] for h in sharers if kept(gpu, h))
    if want < 1:
        return any(g not in allocations and used.get(g, 0.0) + want <= 1 + 1e-9 for g in candidates)
    free = [g for g in candidates if g not in allocations and used.get(g, 0.0) == 0]
    return len(free) >= want


def mark(state: dict[str, Any], takes: Takes, by: str, priority: int, now: float) -> None:
    """Record what the victims must give to `by` (a mark stays until the victim lets go)."""
    marks = state.setdefault("preemptions", {})
    for victim, gpus in takes.items():
        entry: dict[str, Any] = {"by": by, "priority": priority, "since": now}
        marks.setdefault(victim, entry if gpus is None else {**entry, "gpus": gpus})


def forget(state: dict[str, Any], run: str) -> None:
    """`run` let go of its GPUs: its own mark goes; marks it made for itself stay until served."""
    (state.get("preemptions") or {}).pop(run, None)


def reclaim(state: dict[str, Any]) -> None:
    """Marks on runs that hold nothing any more (died, released) are dropped."""
    held = holders(state)
    marks = state.get("preemptions") or {}
    state["preemptions"] = {run: entry for run, entry in marks.items() if run in held}
