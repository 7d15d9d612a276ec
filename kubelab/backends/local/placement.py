"""Where a run at the head of the machine's queue goes: free GPUs that fit, or what it takes from
preemptible runs of lower priority. Pure: a function of the ledger's state.

The ledger (kubelab/backends/local/gpus.py) asks `place` when a run's turn has come, and marks
the victims it names; the Resources panel asks `preview` the same question for a run not yet
submitted ("would preempt exp-12 (low), shrink exp-9 from 4 to 2"), so what the panel says is
what the scheduler would do, not a second copy of its rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubelab.backends.local import preemption
from kubelab.backends.local.elastic import ElasticLaunch
from kubelab.gpu_share import is_fraction
from kubelab.priorities import NORMAL_PRIORITY
from kubelab.spec import ExperimentSpec


class Device(Protocol):
    """What placement reads of a GPU (kubelab/backends/local/gpus.py's `Gpu`)."""

    @property
    def index(self) -> int: ...

    def matches(self, gpu_type: str | None) -> bool: ...


@dataclass(frozen=True)
class Placement:
    """GPUs that fit now (`chosen`), else what to take from whom (`takes`, empty: wait)."""

    chosen: list[int]
    takes: preemption.Takes = field(default_factory=dict)


def request(spec: ExperimentSpec) -> tuple[float, ...]:
    """The GPU counts a run of `spec` asks the ledger for: all its replicas' first, then an
    elastic run's smaller sizes, largest first."""
    return (spec.resources.gpus * spec.replicas, *ElasticLaunch.fewer_gpus(spec))


def fit(state: dict[str, Any], gpus: Sequence[Device], count: float, gpu_type: str | None) -> list[int]:
    """Free GPUs for `count`; a share goes to the fullest GPU with room, so shares pack
    together and whole GPUs stay free for whole requests."""
    shares = state.get("shares")
    shares = shares if isinstance(shares, dict) else {}
    used = {gpu: sum(h["share"] for h in holders) for gpu, holders in shares.items()}
    fitting = [g.index for g in gpus if g.matches(gpu_type) and str(g.index) not in state["allocations"]]
    if is_fraction(count):
        room = [index for index in fitting if used.get(str(index), 0.0) + count <= 1 + 1e-9]
        return [max(room, key=lambda index: (used.get(str(index), 0.0), -index))] if room else []
    free = [index for index in fitting if str(index) not in used]
    return free[: int(count)] if len(free) >= count else []


def place(
    state: dict[str, Any],
    gpus: Sequence[Device],
    counts: Sequence[float],
    gpu_type: str | None,
    priority: int,
    run: str,
) -> Placement:
    """The first of `counts` (an elastic run's sizes, largest first) that fits; when none does,
    only the smallest makes room by preemption."""
    for count in counts:
        chosen = fit(state, gpus, count, gpu_type)
        if chosen:
            return Placement(chosen)
    candidates = [g.index for g in gpus if g.matches(gpu_type)]
    return Placement([], preemption.plan(state, candidates, min(counts), priority, run))


def changes(state: dict[str, Any], takes: preemption.Takes) -> list[dict[str, Any]]:
    """What `takes` means for each victim, lowest priority first: `preempt` (the whole run), or
    `shrink` from `replicas` to `to` (an elastic run giving up its spare replicas)."""
    held = preemption.holders(state)
    found = []
    for victim, gpus in takes.items():
        entries = held.get(victim, [])
        first = entries[0][1] if entries else {}
        change: dict[str, Any] = {
            "run": victim,
            "priority": int(first.get("priority", NORMAL_PRIORITY)),
            "action": "preempt",
        }
        if gpus is not None:
            replicas = {int(h.get("replica", 0)) for _, h in entries}
            leaving = {int(h.get("replica", 0)) for g, h in entries if g in gpus}
            change.update(action="shrink", replicas=len(replicas), to=len(replicas - leaving))
        found.append(change)
    return sorted(found, key=lambda change: (change["priority"], change["run"]))


def preview(
    state: dict[str, Any],
    gpus: Sequence[Device],
    counts: Sequence[float],
    gpu_type: str | None,
    priority: int,
) -> dict[str, Any]:
    """What a new run of `priority` asking for `counts` GPUs would meet once its turn comes:
    the GPUs it would get now (`gpus`), or the runs it would preempt or shrink (`changes`);
    neither: it waits for runs it may not preempt. `ahead`: runs queued before it."""
    placed = place(state, gpus, counts, gpu_type, priority, run="")
    ahead = sum(
        1 for entry in state.get("queue", []) if int(entry.get("priority", NORMAL_PRIORITY)) >= priority
    )
    return {"gpus": placed.chosen, "changes": changes(state, placed.takes), "ahead": ahead}
