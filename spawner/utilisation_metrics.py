"""Mean GPU utilisation per user and group on /hub/metrics, from the NVIDIA DCGM exporter's
`DCGM_FI_DEV_GPU_UTIL` through the Prometheus at `KUBELAB_PROMETHEUS_URL`.

- `jupyterhub_kubelab_gpu_utilisation_percent{group, user}`: the mean, over the GPUs each
  user's pods hold, of each GPU's utilisation averaged over the last `WINDOW` seconds.

The hub serves a scrape on its event loop, so a scrape never waits on Prometheus: it reads the
answer `Refreshed` keeps, and starts a refresh in a thread when that answer is older than
`TTL` (one query at most in flight and per `TTL`, however many scrapers). The exporter's series
name the pod holding each GPU (from the kubelet, not from anything a user writes); each is
counted against its pod's owner as the other series are (`availability.pod_owner`: the user
namespace's, as the hub wrote it on the namespace, never the pod's labels), and only for pods
the availability watch sees live. Where no Prometheus is configured, or it does not answer,
one sentence says so in the hub's log and the family has no samples: never zeros.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from prometheus_client.core import GaugeMetricFamily

from .availability import namespace_owners, pod_owner
from .gpu_usage import DCGM_UTIL, prometheus_query

log = logging.getLogger("kubelab.hub-metrics")

PROMETHEUS_URL = "KUBELAB_PROMETHEUS_URL"
WINDOW = 300  # seconds each GPU's utilisation is averaged over
TTL = 30.0  # seconds an answer is served before a scrape asks for a new one
T = TypeVar("T")


class Refreshed(Generic[T]):
    """The latest answer of a slow `read`, refreshed in a daemon thread at most once per `ttl`.
    `get` never blocks: it returns what is known (None before the first answer and after a
    failed one), and a failure is logged once until a read succeeds again."""

    def __init__(
        self, read: Callable[[], T], ttl: float, what: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.read = read
        self.ttl = ttl
        self.what = what
        self.clock = clock
        self.value: T | None = None
        self.read_at: float | None = None
        self.busy = False
        self.complained = False
        self.lock = threading.Lock()

    def get(self) -> T | None:
        with self.lock:
            stale = self.read_at is None or self.clock() - self.read_at >= self.ttl
            if stale and not self.busy:
                self.busy = True
                threading.Thread(target=self._refresh, name=f"refresh {self.what}", daemon=True).start()
            return self.value

    def _refresh(self) -> None:
        try:
            value: T | None = self.read()
            failed = None
        except Exception as exc:  # any failure: say it once, serve nothing rather than stale numbers
            value, failed = None, exc
        with self.lock:
            self.value = value
            self.read_at = self.clock()
            self.busy = False
            if failed is not None and not self.complained:
                sentence = "%s could not be read (%s): /hub/metrics exports none until it can"
                log.warning(sentence, self.what, failed)
            self.complained = failed is not None


def by_owner(
    series: Iterable[dict[str, Any]], pods: Iterable[dict[str, Any]], namespaces: Iterable[dict[str, Any]]
) -> dict[tuple[str, str], float]:
    """(group, user) -> mean utilisation of the GPU series of the live pods they own."""
    owners = namespace_owners(namespaces)
    live = {
        ((pod.get("metadata") or {}).get("namespace", ""), (pod.get("metadata") or {}).get("name", "")): pod
        for pod in pods
    }
    readings: dict[tuple[str, str], list[float]] = {}
    for one in series:
        labels = one.get("metric") or {}
        # scraped without honorLabels, the exporter's pod labels come back as exported_*
        namespace = labels.get("exported_namespace") or labels.get("namespace", "")
        pod = live.get((namespace, labels.get("exported_pod") or labels.get("pod", "")))
        if pod is None:
            continue  # a pod the hub does not see live (ended, or of another cluster)
        user, group = pod_owner(pod, owners)
        if user:
            readings.setdefault((group, user), []).append(float(one["value"][1]))
    return {key: sum(values) / len(values) for key, values in readings.items()}


def family(utilisation: dict[tuple[str, str], float] | None) -> GaugeMetricFamily:
    gauge = GaugeMetricFamily(
        "jupyterhub_kubelab_gpu_utilisation_percent",
        f"Mean utilisation of the GPUs each user's pods hold, over the last {WINDOW} s",
        labels=["group", "user"],
    )
    for (group, user), percent in sorted((utilisation or {}).items()):
        gauge.add_metric([group, user], round(percent, 3))
    return gauge


class DcgmUtilisation:
    """The exporter's utilisation per (namespace, pod, GPU), kept by `Refreshed`."""

    def __init__(self, url: str, ttl: float = TTL, timeout: float = 10.0) -> None:
        query = f"avg_over_time({DCGM_UTIL}[{WINDOW}s])"
        self.answer = Refreshed(
            lambda: prometheus_query(url, query, timeout), ttl, f"GPU utilisation from Prometheus at {url}"
        )

    def by_owner(
        self, pods: Iterable[dict[str, Any]], namespaces: Iterable[dict[str, Any]]
    ) -> dict[tuple[str, str], float] | None:
        series = self.answer.get()
        return None if series is None else by_owner(series, pods, namespaces)


def from_environ() -> DcgmUtilisation | None:
    url = os.environ.get(PROMETHEUS_URL, "").strip()
    if not url:
        log.info("no Prometheus configured (%s): /hub/metrics exports no GPU utilisation", PROMETHEUS_URL)
        return None
    return DcgmUtilisation(url)
