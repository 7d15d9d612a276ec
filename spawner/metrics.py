"""Hub metrics for a lab's admin, on JupyterHub's own Prometheus endpoint (`/hub/metrics`).

Named as `jupyterhub.metrics` names its metrics (the `JUPYTERHUB_METRICS_PREFIX` namespace,
default `jupyterhub`, then `kubelab_...`) and served from prometheus_client's default registry,
which that endpoint exports. The numbers are computed at scrape time from the pods and nodes
the spawn form's availability watch already mirrors: no extra API calls per scrape.

- `jupyterhub_kubelab_gpus_allocated{gpu_type, group, user}`: GPUs held by pods bound to a node
  (notebooks and experiments; `user`/`group` those of the pod's user namespace, as the hub wrote
  them on it, never the pod's labels, which its user sets; outside user namespaces (trusted-lab
  mode) the `kubelab.io/user`/`kubelab.io/group` labels, empty when a pod carries none). A DRA
  type's GPUs are the devices allocated to the claims such a pod uses (dra_usage.py).
- `jupyterhub_kubelab_gpus_total{gpu_type}` and `jupyterhub_kubelab_gpus_free{gpu_type}` (a DRA
  type's from its devices; no `free` sample where kubelab cannot tell it)
- `jupyterhub_kubelab_gpu_hours_total{gpu_type, group, user}`: GPU-hours held, a counter: at
  each scrape the collector adds what was allocated at the previous scrape times the time since
  (so its resolution is the scrape interval, and a hub restart starts it from 0, which
  Prometheus's `increase()` takes as a counter reset). Usage by user and group over any period
  is then `increase(jupyterhub_kubelab_gpu_hours_total[7d])`, owners as for `gpus_allocated`.
- `jupyterhub_kubelab_experiments{state, user}`: experiments (pods labelled
  `app.kubernetes.io/name=kubelab-experiment`, by namespace and `kubelab.io/experiment`; `user` as
  above) with a running pod
  (`running`), or whose pods all wait to be scheduled or started (`queued`). A Job that Kueue
  holds suspended has no pod yet and is not counted.
- `jupyterhub_kubelab_gpu_utilisation_percent{group, user}`: mean GPU utilisation from DCGM,
  owners as for `gpus_allocated`, where a Prometheus is configured (`utilisation_metrics`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .availability import (
    _DONE,
    Availability,
    Tally,
    cluster_availability,
    namespace_owners,
    pod_owner,
)
from .dra_usage import DraState
from .dra_usage import held as dra_held
from .profiles import Catalog
from .utilisation_metrics import DcgmUtilisation
from .utilisation_metrics import family as utilisation_family
from .utilisation_metrics import from_environ as utilisation_from_environ

# What a collector reads: the nodes, pods and user namespaces an availability watch mirrors,
# its catalog, and its DRA claims (a watch without DRA types gives four).
Listed = list[dict[str, Any]]
Snapshot = tuple[Listed, Listed, Catalog, Listed] | tuple[Listed, Listed, Catalog, Listed, DraState]

PREFIX = os.getenv("JUPYTERHUB_METRICS_PREFIX", "jupyterhub")
EXPERIMENT_NAME = ("app.kubernetes.io/name", "kubelab-experiment")
EXPERIMENT_LABEL = "kubelab.io/experiment"


def gpus_allocated(
    nodes: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    catalog: Catalog,
    namespaces: Iterable[dict[str, Any]] = (),
    dra: DraState | None = None,
) -> Counter[tuple[str, str, str]]:
    """GPUs of live pods bound to a catalog node, and DRA devices allocated to their claims,
    by (type, group, user)."""
    tally = Tally(catalog)  # the availability's reading of nodes and pods, MIG profiles included
    tally.owners = namespace_owners(namespaces)
    tally.rebuild(nodes, ())
    result: Counter[tuple[str, str, str]] = Counter()
    for pod in pods:
        share = tally.share(pod)
        if (
            share is None
            or share.gpu_type is None
            or not share.gpus
            or not (pod.get("spec") or {}).get("nodeName")
        ):
            continue
        user, group = pod_owner(pod, tally.owners)
        result[(share.gpu_type, group, user)] += share.gpus
    if dra is not None:
        result.update(dra_held(pods, dra, lambda pod: pod_owner(pod, tally.owners)))
    return result


def experiments(
    pods: Iterable[dict[str, Any]], namespaces: Iterable[dict[str, Any]] = ()
) -> Counter[tuple[str, str]]:
    """Experiments by (state, user): `running` if any of its live pods runs, else `queued`."""
    owners = namespace_owners(namespaces)
    phases: dict[tuple[str, str, str], set[str]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(EXPERIMENT_NAME[0]) != EXPERIMENT_NAME[1] or not labels.get(EXPERIMENT_LABEL):
            continue
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if phase in _DONE:
            continue
        key = (meta.get("namespace") or "", labels[EXPERIMENT_LABEL], pod_owner(pod, owners)[0])
        phases.setdefault(key, set()).add(phase)
    states = (("running" if "Running" in seen else "queued", user) for (_, _, user), seen in phases.items())
    return Counter(states)


def families(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    catalog: Catalog,
    namespaces: list[dict[str, Any]] | None = None,
    dra: DraState | None = None,
) -> list[GaugeMetricFamily]:
    """The metric families for one snapshot of the cluster (pure: what a scrape returns)."""
    allocated = GaugeMetricFamily(
        f"{PREFIX}_kubelab_gpus_allocated",
        "GPUs held by pods bound to a node, by GPU type, group and user",
        labels=["gpu_type", "group", "user"],
    )
    namespaces = namespaces or []
    held = gpus_allocated(nodes, pods, catalog, namespaces, dra)
    for (gpu_type, group, user), count in sorted(held.items()):
        allocated.add_metric([gpu_type, group, user], count)
    availability: Availability = cluster_availability(nodes, pods, catalog, namespaces)
    total = GaugeMetricFamily(
        f"{PREFIX}_kubelab_gpus_total", "Allocatable GPUs of schedulable nodes", labels=["gpu_type"]
    )
    free = GaugeMetricFamily(f"{PREFIX}_kubelab_gpus_free", "GPUs no live pod requests", labels=["gpu_type"])
    for name, counts in availability.types.items():
        device = dra.counts.get(name) if dra is not None else None
        if device is None:
            total.add_metric([name], counts.total)
            free.add_metric([name], counts.free)
            continue
        total.add_metric([name], device.total)
        if device.free is not None:
            free.add_metric([name], device.free)
    running = GaugeMetricFamily(
        f"{PREFIX}_kubelab_experiments",
        "kubelab experiments with a running pod, or queued for scheduling",
        labels=["state", "user"],
    )
    for (state, user), count in sorted(experiments(pods, namespaces).items()):
        running.add_metric([state, user], count)
    return [allocated, total, free, running]


class GpuHours:
    """GPU-hours held by (type, group, user), summed scrape by scrape: each scrape adds the
    allocation the previous one saw times the seconds between them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.hours: dict[tuple[str, str, str], float] = {}
        self.held: dict[tuple[str, str, str], float] = {}
        self.seen_at: float | None = None
        self.lock = threading.Lock()  # two scrapes at once must not count an interval twice

    def observe(self, held: Mapping[tuple[str, str, str], float]) -> CounterMetricFamily:
        with self.lock:
            now = self.clock()
            if self.seen_at is not None and now > self.seen_at:
                for key, gpus in self.held.items():
                    self.hours[key] = self.hours.get(key, 0.0) + gpus * (now - self.seen_at) / 3600
            self.held = dict(held)
            self.seen_at = now if self.seen_at is None else max(now, self.seen_at)
            family = CounterMetricFamily(
                f"{PREFIX}_kubelab_gpu_hours",
                "GPU-hours held by pods bound to a node, by GPU type, group and user (summed at each scrape)",
                labels=["gpu_type", "group", "user"],
            )
            for key in sorted(set(self.hours) | set(self.held)):
                family.add_metric(list(key), round(self.hours.get(key, 0.0), 6))
            return family


class LabCollector(Collector):
    """Reads the snapshot of whatever availability watch `source` returns (None: nothing yet)."""

    def __init__(
        self,
        source: Callable[[], Snapshot | None],
        clock: Callable[[], float] = time.monotonic,
        utilisation: DcgmUtilisation | None = None,
    ) -> None:
        self.source = source
        self.gpu_hours = GpuHours(clock)
        self.utilisation = utilisation

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        snapshot = self.source()
        if snapshot is not None:
            nodes, pods, catalog, namespaces = snapshot[:4]
            dra = snapshot[4] if len(snapshot) > 4 else None
            yield from families(nodes, pods, catalog, namespaces, dra)
            yield self.gpu_hours.observe(gpus_allocated(nodes, pods, catalog, namespaces, dra))
            if self.utilisation is not None:  # what Prometheus last answered: a scrape never waits
                yield utilisation_family(self.utilisation.by_owner(pods, namespaces))

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # computed at scrape time; nothing to check when registering


_registered: list[LabCollector] = []


def register(source: Callable[[], Snapshot | None]) -> LabCollector:
    """Register once per process in the registry /hub/metrics exports."""
    if not _registered:
        collector = LabCollector(source, utilisation=utilisation_from_environ())
        REGISTRY.register(collector)
        _registered.append(collector)
    return _registered[0]
