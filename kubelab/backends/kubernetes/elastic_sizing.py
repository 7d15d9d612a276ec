"""How big each elastic Indexed Job of a namespace should be now: a pure policy and its inputs.

An elastic run on Kubernetes without the Training Operator is an Indexed Job that kubelab
resizes (kubelab/backends/kubernetes/elastic_resizer.py patches `parallelism` and `completions`
together; the Job controller removes the highest indexes on the way down). `plan` decides from
what the cluster shows: the GPUs still free (the namespace's ResourceQuota, and per node where
nodes and pods are readable), the elastic runs (size, `min`, `max`, priority), and the runs
whose pods wait for GPUs. A waiting run of higher priority takes replicas above `min` from the
lowest-priority preemptible elastic runs, only when that lets its pod fit; with nobody waiting,
elastic runs grow into what is free, up to `max`. The readers below turn the API's objects
into these inputs, so the whole decision is testable without a cluster.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.priority_classes import PREFIX
from kubelab.priorities import NORMAL_PRIORITY, PRIORITY_NAMES, default_preemptible, priority_name
from kubelab.quantity import parse_quantity

Obj = dict[str, Any]
ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class ElasticRun:
    """One elastic Indexed Job: its size now, its range, and where its live pods are."""

    name: str
    low: int
    high: int
    size: int  # the Job's parallelism (= completions)
    per: int  # GPUs per replica
    priority: int = NORMAL_PRIORITY
    preemptible: bool = True
    nodes: dict[int, str | None] = field(default_factory=dict)  # live pod's index -> its node
    settling: bool = False  # pods of a smaller size are still being deleted: leave it be for now

    @property
    def busy(self) -> bool:
        """A resize under way: pods being deleted, or pods above its size not yet deleted."""
        return self.settling or any(index >= self.size for index in self.nodes)


@dataclass(frozen=True)
class Waiter:
    """A run whose pods are not placed yet: `pods` of `gpus` GPUs each."""

    name: str
    run_id: str
    gpus: int
    pods: int
    priority: int = NORMAL_PRIORITY


@dataclass
class Room:
    """GPUs still free: under the namespace's quota (None: no GPU quota) and per node (None:
    nodes unreadable). A replica fits when both allow it; one GPU pod sits on one node."""

    quota: int | None = None
    nodes: dict[str, int] | None = None

    @property
    def known(self) -> bool:
        return self.quota is not None or self.nodes is not None

    def fits(self, gpus: int) -> bool:
        if self.quota is not None and self.quota < gpus:
            return False
        return self.nodes is None or any(free >= gpus for free in self.nodes.values())

    def take(self, gpus: int) -> bool:
        if not self.fits(gpus):
            return False
        if self.quota is not None:
            self.quota -= gpus
        if self.nodes is not None:  # the fullest node that fits: leave big holes for big pods
            nodes = self.nodes
            nodes[min((n for n in nodes if nodes[n] >= gpus), key=nodes.__getitem__)] -= gpus
        return True

    def give(self, gpus: int, node: str | None) -> None:
        if self.quota is not None:
            self.quota += gpus
        if self.nodes is not None and node in self.nodes:
            self.nodes[node] += gpus

    def copy(self) -> Room:
        return Room(self.quota, dict(self.nodes) if self.nodes is not None else None)


@dataclass(frozen=True)
class Resize:
    name: str
    size: int
    reason: str


def settle(runs: Iterable[ElasticRun], room: Room) -> None:
    """Count a resize still under way as done: pods above the size are leaving (their GPUs are
    free to plan with), indexes below it without a pod are coming (their GPUs are spoken for).
    A pod already being deleted is left as the quota and the nodes count it (until it is gone)."""
    for run in runs:
        for index, node in run.nodes.items():
            if index >= run.size:
                room.give(run.per, node)
        for index in range(run.size):
            if index not in run.nodes:
                room.take(run.per)


def start_size(low: int, high: int, per: int, room: Room) -> int:
    """A new elastic run's first size: as many replicas as fit, between `min` and `max`."""
    if not per or not room.known:
        return high
    size = 0
    while size < high and room.take(per):
        size += 1
    return max(low, size)


def plan(runs: list[ElasticRun], waiters: list[Waiter], room: Room) -> list[Resize]:
    """The resizes to make now (none when every run is at its right size). A run being resized
    is not resized again until it has settled, and nobody grows while anybody waits: the
    objects a plan reads lag behind each other (the quota's usage most), and this keeps a
    stale read from undoing the last step."""
    room = room.copy()
    settle(runs, room)
    sizes = {run.name: run.size for run in runs}
    why: dict[str, str] = {}
    for waiter in sorted(waiters, key=lambda w: -w.priority):
        for _ in range(waiter.pods):
            if room.take(waiter.gpus):
                continue
            trial, taken = room.copy(), dict(sizes)
            victims = sorted(
                (r for r in runs if r.per and r.preemptible and r.priority < waiter.priority and not r.busy),
                key=lambda r: (r.priority, -taken[r.name]),
            )
            for run in victims:
                while taken[run.name] > run.low and not trial.fits(waiter.gpus):
                    taken[run.name] -= 1
                    trial.give(run.per, run.nodes.get(taken[run.name]))
            if trial.take(waiter.gpus):
                for run in victims:
                    if taken[run.name] < sizes[run.name]:
                        who = f"{waiter.name} ({waiter.run_id}) (priority {priority_name(waiter.priority)})"
                        why[run.name] = f"shrunk to {taken[run.name]} of {run.high} replicas for {who}"
                room, sizes = trial, taken
    if not waiters and not any(run.busy for run in runs):
        for run in sorted(runs, key=lambda r: -r.priority):
            if not run.per or not room.known:
                continue
            start = sizes[run.name]
            while sizes[run.name] < run.high and room.take(run.per):
                sizes[run.name] += 1
            if sizes[run.name] > start:
                why[run.name] = f"grew to {sizes[run.name]} of {run.high} replicas: GPUs came free"
    return [Resize(r.name, sizes[r.name], why[r.name]) for r in runs if sizes[r.name] != r.size]


# -- reading the API's objects ------------------------------------------------------------------


def _gpus(template: Obj, resource: str) -> int:
    total = Decimal(0)
    for container in (template.get("spec") or {}).get("containers") or []:
        amounts = (container.get("resources") or {}).get("limits") or {}
        total += parse_quantity(str(amounts.get(resource, "0")))
    return math.ceil(total)


def _priority(template: Obj) -> int:
    name = str((template.get("spec") or {}).get("priorityClassName") or "")
    return PRIORITY_NAMES.get(name.removeprefix(PREFIX), NORMAL_PRIORITY)


def _finished(job: Obj) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def elastic_range(job: Obj) -> tuple[int, int] | None:
    """(min, max) of an elastic Indexed Job kubelab made, from its annotation; else None."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(names.ELASTIC_ANNOTATION, "")
    low, colon, high = str(text).partition(":")
    return (int(low), int(high)) if colon and low.isdigit() and high.isdigit() else None


def _live(pods: list[Obj], job: str) -> list[Obj]:
    return [
        p
        for p in pods
        if (p.get("metadata") or {}).get("labels", {}).get("job-name") == job
        and (p.get("status") or {}).get("phase") not in ENDED
    ]


def elastic_run(job: Obj, pods: list[Obj], resource: str) -> ElasticRun | None:
    """The elastic run a Job is, with its live pods' nodes; None for another Job or an ended one."""
    bounds = elastic_range(job)
    if bounds is None or _finished(job) or (job.get("spec") or {}).get("suspend"):
        return None
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    template = spec.get("template") or {}
    priority = _priority(template)
    try:
        preemptible = bool(json.loads(meta["annotations"][names.SPEC_ANNOTATION])["preemptible"])
    except (KeyError, TypeError, ValueError):
        preemptible = default_preemptible(priority)
    nodes: dict[int, str | None] = {}
    settling = False
    for pod in _live(pods, meta.get("name", "")):
        index = ((pod.get("metadata") or {}).get("annotations") or {}).get(names.INDEX_ANNOTATION, "")
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            settling = True
        elif str(index).isdigit():
            nodes[int(index)] = (pod.get("spec") or {}).get("nodeName")
    size = int(spec.get("parallelism") or 0)
    per = _gpus(template, resource)
    name = meta.get("name", "")
    return ElasticRun(name, bounds[0], bounds[1], size, per, priority, preemptible, nodes, settling)


def waiter(job: Obj, pods: list[Obj], resource: str) -> Waiter | None:
    """A Job (not elastic) some of whose GPU pods are not on a node yet; None otherwise."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    if elastic_range(job) is not None or _finished(job) or spec.get("suspend"):
        return None
    template = spec.get("template") or {}
    gpus = _gpus(template, resource)
    if not gpus:
        return None
    meta = job.get("metadata") or {}
    parallelism = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
    left = int(spec.get("completions") or parallelism) - int(status.get("succeeded") or 0)
    placed = sum(1 for p in _live(pods, meta.get("name", "")) if (p.get("spec") or {}).get("nodeName"))
    missing = min(parallelism, left) - placed
    if missing <= 0:
        return None
    run_id = (meta.get("labels") or {}).get(names.EXPERIMENT, "")
    return Waiter(meta.get("name", ""), run_id, gpus, missing, _priority(template))


def quota_room(quotas: list[Obj], resource: str, pods: Iterable[Obj] = ()) -> int | None:
    """GPUs the namespace's quotas still allow (the tightest), or None when none bounds them.
    Usage is the larger of the quota's and the sum over `pods` (the user's unfinished pods): the
    quota controller's recount can lag behind a pod just admitted."""
    mine = sum(_gpus(p, resource) for p in pods if (p.get("status") or {}).get("phase") not in ENDED)
    free: int | None = None
    for quota in quotas:
        status = quota.get("status") or {}
        hard = status.get("hard") or (quota.get("spec") or {}).get("hard") or {}
        used = status.get("used") or {}
        for key in (f"requests.{resource}", resource):
            if key in hard:
                spent = max(parse_quantity(str(used.get(key, "0"))), Decimal(mine))
                left = math.floor(parse_quantity(str(hard[key])) - spent)
                free = left if free is None else min(free, left)
    return free


def node_room(nodes: list[Obj], pods: list[Obj], resource: str, selector: dict[str, str]) -> dict[str, int]:
    """Free GPUs on each ready node the group's pods may use: allocatable less what bound,
    unfinished pods ask for."""
    free: dict[str, int] = {}
    for node in nodes:
        meta, spec = node.get("metadata") or {}, node.get("spec") or {}
        labels = meta.get("labels") or {}
        if spec.get("unschedulable") or any(labels.get(k) != v for k, v in selector.items()):
            continue
        allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
        if allocatable is not None:
            free[meta.get("name", "")] = math.floor(parse_quantity(str(allocatable)))
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name in free and (pod.get("status") or {}).get("phase") not in ENDED:
            free[node_name] -= _gpus(pod, resource)
    return {name: max(0, value) for name, value in free.items()}
