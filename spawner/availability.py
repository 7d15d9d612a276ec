"""Live GPU availability: free and total GPUs per type, and what each user and group holds.

On a cluster the numbers come from nodes' allocatable GPUs minus the requests of pods that
hold or are about to hold them (running or pending). A watch keeps a mirror of nodes and pods
current, so a page view reads memory instead of listing the cluster. On one machine the
same numbers come from `kubelab.backends.local.gpus.GpuAllocator.snapshot()`, the ledger the local backend
and the local spawner share.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, cast

from kubelab.quantity import parse_quantity

from . import dra_availability
from .dra_usage import DraState
from .mirror import Mirror
from .profiles import Catalog

USER_LABEL = "kubelab.io/user"
GROUP_LABEL = "kubelab.io/group"
USER_NAMESPACES = "app.kubernetes.io/managed-by=kubelab,kubelab.io/user"  # label selector
_DONE = ("Succeeded", "Failed")


def group_label(name: str) -> str:
    """A group name as a label value (hub group names may hold spaces or capitals)."""
    from kubespawner.slugs import safe_slug

    return cast(str, safe_slug(name, max_length=63))


@dataclass
class TypeCount:
    total: int = 0
    free: int = 0


@dataclass
class Usage:
    """What one user or group holds right now (requests of live pods)."""

    gpus: int = 0
    cpu: Decimal = Decimal(0)
    memory: Decimal = Decimal(0)


@dataclass
class Availability:
    types: dict[str, TypeCount] = field(default_factory=dict)
    users: dict[str, Usage] = field(default_factory=lambda: defaultdict(Usage))
    groups: dict[str, Usage] = field(default_factory=lambda: defaultdict(Usage))
    # By namespace: a user cannot move a pod out of their own namespace, as they can relabel it.
    namespaces: dict[str, Usage] = field(default_factory=lambda: defaultdict(Usage))
    unattributed: int = 0  # GPUs asked for by pending pods that name no type
    shares_left: dict[str, float] = field(default_factory=dict)  # the most left on one shared GPU
    unknown: set[str] = field(default_factory=set)  # DRA types whose free count kubelab cannot tell

    def room(self, gpu_type: str | None) -> float:
        """The largest share still free on one GPU already shared (this machine's ledger)."""
        if gpu_type is None:
            return max(self.shares_left.values(), default=0)
        return self.shares_left.get(gpu_type, 0)

    def free(self, gpu_type: str | None) -> int:
        if gpu_type is None:
            return max(0, sum(c.free for c in self.types.values()) - self.unattributed)
        return self.types.get(gpu_type, TypeCount()).free

    def total(self, gpu_type: str | None) -> int:
        if gpu_type is None:
            return sum(c.total for c in self.types.values())
        return self.types.get(gpu_type, TypeCount()).total

    def user(self, name: str) -> Usage:
        return self.users.get(name, Usage())

    def group(self, name: str) -> Usage:
        return self.groups.get(name, Usage())

    def namespace(self, name: str) -> Usage:
        return self.namespaces.get(name, Usage())

    def to_json(self) -> dict[str, Any]:
        return {"types": [{"type": t, "total": c.total, "free": c.free} for t, c in self.types.items()]}


def pod_requests(pod: dict[str, Any], resource: str) -> tuple[int, Decimal, Decimal]:
    """(GPUs, CPU, memory) a pod holds: extended resources count by limits (= requests)."""
    gpus, cpu, memory = 0, Decimal(0), Decimal(0)
    for container in (pod.get("spec") or {}).get("containers") or []:
        res = container.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        gpus += int(parse_quantity(limits.get(resource, requests.get(resource, 0))))
        cpu += parse_quantity(requests.get("cpu", limits.get("cpu", 0)))
        memory += parse_quantity(requests.get("memory", limits.get("memory", 0)))
    return gpus, cpu, memory


def namespace_owners(namespaces: Iterable[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """User namespace -> (user, group as a label value), from what the hub wrote on it."""
    owners = {}
    for item in namespaces:
        meta = item.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get("app.kubernetes.io/managed-by") == "kubelab" and labels.get(USER_LABEL):
            group = (meta.get("annotations") or {}).get(GROUP_LABEL) or ""
            owners[meta["name"]] = (labels[USER_LABEL], group_label(group) if group else "")
    return owners


def pod_owner(pod: dict[str, Any], owners: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """(user, group) a pod counts against: its user namespace's, else its labels' ('' if none)."""
    meta = pod.get("metadata") or {}
    if meta.get("namespace") in owners:
        return owners[meta["namespace"]]
    labels = meta.get("labels") or {}
    return labels.get(USER_LABEL, ""), labels.get(GROUP_LABEL, "")


@dataclass(frozen=True)
class PodShare:
    """What one live pod holds, and whose: the unit the availability adds and takes away."""

    gpus: int
    cpu: Decimal
    memory: Decimal
    holders: tuple[tuple[str, str], ...]  # ("users" | "groups" | "namespaces", name)
    gpu_type: str | None  # None with GPUs: asked for by a pending pod that names no type


class Tally:
    """The availability kept current one change at a time: a pod's change costs O(1), so a
    spawn's admission reads the numbers without recounting every pod of the cluster. A change
    of nodes (or of the catalog) recounts all."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.by_label = {t.label_value: t for t in catalog.gpu_types}
        self.resources = {t.resource for t in catalog.gpu_types} or {"nvidia.com/gpu"}
        self.node_types: dict[str, list[str]] = {}  # a MIG node offers each of its profiles
        self.by_resource = {t.resource: t for t in catalog.gpu_types if t.by_resource}
        self.used: dict[str, int] = {}
        self.shares: dict[str, PodShare] = {}
        self.owners: dict[str, tuple[str, str]] = {}  # user namespace -> (user, group), the hub's
        self.result = Availability()

    def rebuild(self, nodes: Iterable[dict[str, Any]], pods: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self.node_types, self.used, self.shares, self.result = {}, {}, {}, Availability()
        for listed in self.catalog.gpu_types:
            self.result.types[listed.name] = TypeCount()
            self.used[listed.name] = 0
        for node in nodes:
            meta = node.get("metadata") or {}
            if (node.get("spec") or {}).get("unschedulable"):
                continue
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            labelled = self.by_label.get((meta.get("labels") or {}).get(self.catalog.gpu_label, ""))
            offered = [labelled] if labelled and not labelled.by_resource else []
            for gpu_type in offered + [t for r, t in self.by_resource.items() if r in allocatable]:
                self.node_types.setdefault(meta["name"], []).append(gpu_type.name)
                count = parse_quantity(allocatable.get(gpu_type.resource, 0))
                self.result.types[gpu_type.name].total += int(count)
        for key, pod in pods:
            self.pod(key, pod)
        for name in self.used:
            self._free(name)

    def share(self, pod: dict[str, Any]) -> PodShare | None:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        meta = pod.get("metadata") or {}
        if status.get("phase") in _DONE or meta.get("deletionTimestamp"):
            return None
        gpus, cpu, memory = 0, Decimal(0), Decimal(0)
        asked: dict[str, int] = {}
        for resource in self.resources:
            g, cpu, memory = pod_requests(pod, resource)
            gpus += g
            asked[resource] = g
        user, group = pod_owner(pod, self.owners)  # never the pod's own labels in a user namespace
        holders = [(table, name) for table, name in (("users", user), ("groups", group)) if name]
        if meta.get("namespace"):
            holders.append(("namespaces", meta["namespace"]))
        return PodShare(gpus, cpu, memory, tuple(holders), self.pod_type(spec, asked))

    def pod_type(self, spec: dict[str, Any], asked: dict[str, int]) -> str | None:
        """Its node's type for the resource it asks; pending: its MIG profile or selector's type."""
        if spec.get("nodeName"):
            offered = [self.catalog.gpu_type(n) for n in self.node_types.get(spec["nodeName"], [])]
            return next((t.name for t in offered if t and asked.get(t.resource)), None)
        mig = next((t for r, t in self.by_resource.items() if asked.get(r)), None)
        wanted = mig or self.by_label.get((spec.get("nodeSelector") or {}).get(self.catalog.gpu_label, ""))
        return wanted.name if wanted else None

    def pod(self, key: str, pod: dict[str, Any] | None) -> None:
        """Take away what the pod at `key` held, then add what it holds now (None: gone)."""
        old = self.shares.pop(key, None)
        if old is not None:
            self._add(old, -1)
        new = self.share(pod) if pod is not None else None
        if new is not None:
            self.shares[key] = new
            self._add(new, 1)

    def _add(self, share: PodShare, sign: int) -> None:
        for table, name in share.holders:
            usage = getattr(self.result, table)[name]
            usage.gpus += sign * share.gpus
            usage.cpu += sign * share.cpu
            usage.memory += sign * share.memory
        if not share.gpus:
            return
        if share.gpu_type is None:
            self.result.unattributed += sign * share.gpus
        else:
            self.used[share.gpu_type] += sign * share.gpus
            self._free(share.gpu_type)

    def _free(self, name: str) -> None:
        count = self.result.types[name]
        count.free = max(0, count.total - self.used[name])


def cluster_availability(
    nodes: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    catalog: Catalog,
    namespaces: Iterable[dict[str, Any]] = (),
) -> Availability:
    """Per catalog type: sum of nodes' allocatable GPUs minus GPUs requested by live pods; what
    each user, group and namespace holds (owners from the hub's namespaces, not pod labels)."""
    tally = Tally(catalog)
    tally.owners = namespace_owners(namespaces)
    tally.rebuild(nodes, ((str(i), pod) for i, pod in enumerate(pods)))
    return tally.result


def notebook_run(user: str, group: str, server: str) -> str:
    """The ledger name of a notebook holding GPUs: `notebook/<user>/<group>/<server>`."""
    return f"notebook/{user}/{group}/{server}"


def local_availability(snapshot: dict[str, Any], catalog: Catalog) -> Availability:
    """The same numbers from the machine's GPU ledger. Devices are matched to catalog types by
    name (`T4` matches `Tesla T4`); without a catalog each device name is its own type. GPUs
    held by notebooks count against their user and group (their ledger names say whose)."""
    result = Availability()
    for device in snapshot.get("devices", []):
        name = next((t.name for t in catalog.gpu_types if t.name.lower() in device["name"].lower()), None)
        if name is None:
            name = device["name"] if not catalog.gpu_types else None
        if name is None:
            continue
        count = result.types.setdefault(name, TypeCount())
        count.total += 1
        shared = sum(float(s.get("share", 0)) for s in device.get("shares") or [])
        count.free += device.get("holder") is None and not shared
        if shared and device.get("holder") is None:
            result.shares_left[name] = max(result.room(name), 1 - shared)
        parts = (device.get("holder") or "").split("/")
        if len(parts) == 4 and parts[0] == "notebook":
            result.users[parts[1]].gpus += 1
            result.groups[parts[2]].gpus += 1
    for gpu_type in catalog.gpu_types:
        result.types.setdefault(gpu_type.name, TypeCount())
    return result


class ClusterAvailability:
    """Nodes and pods mirrored by watches; `current()` is cheap: a pod's event updates the
    tally in place, a node's event (or a fresh list) recounts on the next read."""

    def __init__(self, core_api: Any, catalog: Catalog, custom_api: Any = None) -> None:
        self._catalog = catalog
        self._tally: Tally | None = None
        self._node_seen: dict[str, str] = {}
        self.nodes = Mirror(core_api.list_node, self._nodes_changed)
        self.pods = Mirror(core_api.list_pod_for_all_namespaces, self._pod_changed)
        self.namespaces = Mirror(
            core_api.list_namespace, self._namespace_changed, label_selector=USER_NAMESPACES
        )
        # DRA's slices, claims and classes, mirrored where the catalog has DRA types
        self.dra = dra_availability.DraWatch(custom_api) if custom_api is not None else None
        self._tasks: list[asyncio.Task[None]] = []

    def _dra_types(self) -> list[Any]:
        return [t for t in self._catalog.gpu_types if t.sharing == "dra"] if self.dra else []

    def _mirrors(self) -> list[Mirror]:
        dra = self.dra.mirrors.values() if self.dra and self._dra_types() else ()
        return [self.nodes, self.pods, self.namespaces, *dra]

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @catalog.setter
    def catalog(self, catalog: Catalog) -> None:
        if catalog is not self._catalog:
            self._catalog, self._tally = catalog, None

    def _nodes_changed(self, key: str | None, node: dict[str, Any] | None) -> None:
        """Recount only when what the tally reads of a node changed (not its heartbeats)."""
        if key is None:
            self._node_seen, self._tally = {}, None
            return
        meta = (node or {}).get("metadata") or {}
        seen = json.dumps(
            [
                (meta.get("labels") or {}).get(self._catalog.gpu_label),
                ((node or {}).get("spec") or {}).get("unschedulable"),
                ((node or {}).get("status") or {}).get("allocatable"),
            ]
            if node
            else None
        )
        if self._node_seen.get(key) != seen:
            self._node_seen[key] = seen
            self._tally = None

    def _namespace_changed(self, key: str | None, namespace: dict[str, Any] | None) -> None:
        """Recount only when a user namespace's owner changed (rare), not on its other edits (a
        spawn's bundle hash, a new user's labels arriving one apply after another)."""
        if key is None or self._tally is None:
            self._tally = None
            return
        name = key.lstrip("/")
        if namespace_owners([namespace] if namespace else []).get(name) != self._tally.owners.get(name):
            self._tally = None

    def user_namespace(self, name: str) -> dict[str, Any] | None:
        """The mirror's copy of a user namespace (None before the first list or if not there)."""
        return self.namespaces.items.get(f"/{name}") if self.namespaces.loaded.is_set() else None

    async def pod_changed(self, key: str) -> None:
        """Returns at the next event for the pod `key` (`namespace/name`) or a fresh list."""
        await self.pods.changed(key)

    def _pod_changed(self, key: str | None, pod: dict[str, Any] | None) -> None:
        if key is None or self._tally is None:
            self._tally = None
        else:
            self._tally.pod(key, pod)

    async def start(self, timeout: float = 30) -> None:
        mirrors = self._mirrors()
        if not self._tasks:
            self._tasks = [asyncio.create_task(m.run()) for m in mirrors]
        await asyncio.wait_for(asyncio.gather(*(m.loaded.wait() for m in mirrors)), timeout)

    def snapshot(self) -> tuple[list[Any], list[Any], Catalog, list[Any], DraState] | None:
        """Nodes, pods, catalog, user namespaces and DRA's claims once all are listed (for
        /hub/metrics)."""
        if not all(m.loaded.is_set() for m in self._mirrors()):
            return None
        nodes, pods, namespaces = (list(m.items.values()) for m in (self.nodes, self.pods, self.namespaces))
        dra = DraState()
        if self.dra and (types := self._dra_types()):
            claims = dict(self.dra.mirrors["resourceclaims"].items)
            dra = DraState(claims, self.dra.membership(types).type_of, self.dra.counts(types))
        return nodes, pods, self._catalog, namespaces, dra

    def current(self) -> Availability:
        if self._tally is None:
            self._tally = Tally(self._catalog)
            self._tally.owners = namespace_owners(self.namespaces.items.values())
            self._tally.rebuild(self.nodes.items.values(), self.pods.items.items())
        if self.dra and (types := self._dra_types()) and self.dra.loaded():
            result = self._tally.result
            for name, count in self.dra.counts(types).items():  # devices, not node resources
                result.types[name] = TypeCount(count.total, count.free or 0)
                result.unknown.discard(name)
                if count.free is None:
                    result.unknown.add(name)
        return self._tally.result

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
