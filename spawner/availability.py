"""Live GPU availability: free and total GPUs per type, and what each user and group holds.

On a cluster the numbers come from nodes' allocatable GPUs minus the requests of pods that
hold or are about to hold them (running or pending). A watch keeps a mirror of nodes, pods and
kubelab's user namespaces current, so a page view reads memory instead of listing the cluster.

Whose a pod is comes from its namespace, never from its labels, which anyone who may create a
Job sets as they like: a user namespace's user is its `kubelab.io/user` label and its group the
`kubelab.io/group` annotation of its last spawn, both written by the hub, neither writable by
the notebook. Only pods outside user namespaces (trusted-lab mode's shared one) count by label.

On one machine the same numbers come from `kubelab.backends.local.gpus.GpuAllocator.snapshot()`,
the ledger the local backend and the local spawner share.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubelab.quantity import parse_quantity

from .profiles import Catalog

USER_LABEL = "kubelab.io/user"
GROUP_LABEL = "kubelab.io/group"
USER_NAMESPACES = "app.kubernetes.io/managed-by=kubelab,kubelab.io/user"  # label selector
_DONE = ("Succeeded", "Failed")
log = logging.getLogger(__name__)


def group_label(name: str) -> str:
    """A group name as a label value (hub group names may hold spaces or capitals)."""
    from kubespawner.slugs import safe_slug

    return safe_slug(name, max_length=63)


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


def cluster_availability(
    nodes: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    catalog: Catalog,
    namespaces: Iterable[dict[str, Any]] = (),
) -> Availability:
    """Per catalog type: sum of nodes' allocatable GPUs minus GPUs requested by live pods; what
    each user, group and namespace holds."""
    result = Availability()
    by_label = {t.label_value: t for t in catalog.gpu_types}
    for gpu_type in catalog.gpu_types:
        result.types[gpu_type.name] = TypeCount()
    node_type: dict[str, str] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        gpu_type = by_label.get((meta.get("labels") or {}).get(catalog.gpu_label, ""))
        if gpu_type is None or (node.get("spec") or {}).get("unschedulable"):
            continue
        count = int(
            parse_quantity(((node.get("status") or {}).get("allocatable") or {}).get(gpu_type.resource, 0))
        )
        node_type[meta["name"]] = gpu_type.name
        result.types[gpu_type.name].total += count
        result.types[gpu_type.name].free += count
    resources = {t.resource for t in catalog.gpu_types} or {"nvidia.com/gpu"}
    owners = namespace_owners(namespaces)
    for pod in pods:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        if status.get("phase") in _DONE or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        gpus, cpu, memory = 0, Decimal(0), Decimal(0)
        for resource in resources:
            g, cpu, memory = pod_requests(pod, resource)
            gpus += g
        meta = pod.get("metadata") or {}
        user, group = pod_owner(pod, owners)
        held = [(table, name) for table, name in ((result.users, user), (result.groups, group)) if name]
        if meta.get("namespace"):
            held.append((result.namespaces, meta["namespace"]))
        for table, name in held:
            usage = table[name]
            usage.gpus += gpus
            usage.cpu += cpu
            usage.memory += memory
        if not gpus:
            continue
        type_name = node_type.get(spec.get("nodeName") or "")
        if type_name is None and not spec.get("nodeName"):
            wanted = by_label.get((spec.get("nodeSelector") or {}).get(catalog.gpu_label, ""))
            type_name = wanted.name if wanted else None
        if type_name is None:
            result.unattributed += gpus
        else:
            result.types[type_name].free = max(0, result.types[type_name].free - gpus)
    return result


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
        count.free += device.get("holder") is None
        parts = (device.get("holder") or "").split("/")
        if len(parts) == 4 and parts[0] == "notebook":
            result.users[parts[1]].gpus += 1
            result.groups[parts[2]].gpus += 1
    for gpu_type in catalog.gpu_types:
        result.types.setdefault(gpu_type.name, TypeCount())
    return result


class _Mirror:
    """A list-then-watch copy of one kind of object, restarted from a fresh list on any error."""

    def __init__(self, list_method: Callable[..., Any], on_change: Callable[[], None], **query: str) -> None:
        self.list_method = list_method
        self.on_change = on_change
        self.query = query
        self.items: dict[str, dict[str, Any]] = {}
        self.loaded = asyncio.Event()

    @staticmethod
    def key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    async def run(self) -> None:
        from kubernetes_asyncio import watch

        delay = 0.1
        while True:
            try:
                response = await self.list_method(_preload_content=False, **self.query)
                listing = json.loads(await response.read())
                self.items = {self.key(o): o for o in listing["items"]}
                self.loaded.set()
                self.on_change()
                stream = watch.Watch()
                async with stream.stream(
                    self.list_method,
                    _preload_content=False,
                    timeout_seconds=300,
                    resource_version=listing["metadata"]["resourceVersion"],
                    **self.query,
                ) as events:
                    async for event in events:
                        obj = event["raw_object"]
                        if event["type"] == "DELETED":
                            self.items.pop(self.key(obj), None)
                        elif event["type"] in ("ADDED", "MODIFIED"):
                            self.items[self.key(obj)] = obj
                        self.on_change()
                        delay = 0.1
            except asyncio.CancelledError:
                raise
            except Exception:  # a dropped watch or an API hiccup: list again after a pause
                log.warning("GPU availability watch failed; listing again", exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30)


class ClusterAvailability:
    """Nodes, pods and user namespaces mirrored by watches; `current()` is cheap and recomputed
    only on change."""

    def __init__(self, core_api: Any, catalog: Catalog) -> None:
        self.catalog = catalog
        self._cache: Availability | None = None
        self.nodes = _Mirror(core_api.list_node, self._changed)
        self.pods = _Mirror(core_api.list_pod_for_all_namespaces, self._changed)
        self.namespaces = _Mirror(core_api.list_namespace, self._changed, label_selector=USER_NAMESPACES)
        self._tasks: list[asyncio.Task[None]] = []

    def _changed(self) -> None:
        self._cache = None

    async def start(self, timeout: float = 30) -> None:
        mirrors = (self.nodes, self.pods, self.namespaces)
        if not self._tasks:
            self._tasks = [asyncio.create_task(m.run()) for m in mirrors]
        await asyncio.wait_for(asyncio.gather(*(m.loaded.wait() for m in mirrors)), timeout)

    def snapshot(self) -> tuple[list[Any], list[Any], Catalog, list[Any]] | None:
        """Nodes, pods, catalog and user namespaces once all are listed (for /hub/metrics)."""
        if not all(m.loaded.is_set() for m in (self.nodes, self.pods, self.namespaces)):
            return None
        listed = (list(m.items.values()) for m in (self.nodes, self.pods, self.namespaces))
        nodes, pods, namespaces = listed
        return nodes, pods, self.catalog, namespaces

    def current(self) -> Availability:
        if self._cache is None:
            self._cache = cluster_availability(
                self.nodes.items.values(),
                self.pods.items.values(),
                self.catalog,
                self.namespaces.items.values(),
            )
        return self._cache

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
