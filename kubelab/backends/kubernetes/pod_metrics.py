"""A Kubernetes run's CPU and memory from the resource metrics API (`metrics.k8s.io/v1beta1`
PodMetrics, served by metrics-server or another adapter): each container's usage, summed over
the run's pods, as the sample fields the local sampler writes (`cpu_percent`: percent of one
core, so 250 is two and a half cores; `rss_mib`: the working set, the memory the kernel would
not reclaim).

The API keeps no history: it answers what the pods use now (a window of a few seconds to a
minute). A server lists every run's pods at once each interval (`metrics_sampler.py`); a process
that watches nothing (the CLI) reads the run's own pods when a view asks (`dcgm.LiveSamples`).
Either way the reading is appended to the run's `system.jsonl`. Where the API is not served (no
APIService), unavailable, or refused to the notebook's account, the reading is none and says
why: never zeros.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.errors import RetryPolicy, api_message, call
from kubelab.errors import KubelabError

GROUP, VERSION, PLURAL = "metrics.k8s.io", "v1beta1", "pods"
SOURCE = "metrics-api"
"""The `process` source a Kubernetes run's `system.jsonl` names when the readings come from here."""
ONCE = RetryPolicy(attempts=1)  # a view's read waits for no retries: the next poll asks again
MIB = 1024 * 1024
TIMEOUT = 10.0  # seconds a list may take: a stalled API server holds up no shutdown for long


def _moment(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def reading(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One sample line from PodMetrics objects: CPU and memory summed over every container of
    every pod, at the newest pod's `timestamp`; None where no pod has a container measured."""
    cores, memory, moment, measured = 0.0, 0.0, None, False
    for item in items:
        for container in item.get("containers") or ():
            usage = container.get("usage") or {}
            if "cpu" in usage:
                cores += float(parse_quantity(usage["cpu"]))
                measured = True
            if "memory" in usage:
                memory += float(parse_quantity(usage["memory"]))
                measured = True
        if item.get("timestamp"):
            stamp = _moment(str(item["timestamp"]))
            moment = stamp if moment is None else max(moment, stamp)
    if not measured or moment is None:
        return None
    return {"time": round(moment, 3), "cpu_percent": round(cores * 100, 1), "rss_mib": round(memory / MIB, 1)}


def listed(api: KubeApi, selector: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The PodMetrics of the pods with the labels `selector` in the namespace, or none and why."""
    where = f"{GROUP}/{VERSION}"
    try:
        answer = call(
            api.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            api.namespace,
            PLURAL,
            label_selector=selector,
            policy=ONCE,
            host=api.host,
            _request_timeout=TIMEOUT,
        )
    except ApiException as exc:
        if exc.status == 404:
            return None, f"the cluster does not serve the metrics API ({where}): no CPU or memory samples"
        if exc.status in (401, 403):
            return None, (
                f"the metrics API ({where}) refused to list pod metrics in {api.namespace}: "
                f"{api_message(exc)}. The notebook's account needs get/list on pods.metrics.k8s.io"
            )
        return None, f"the metrics API ({where}) is unavailable: {api_message(exc)}"
    except KubelabError as exc:  # the API server unreachable: said, and asked again at the next poll
        return None, f"the metrics API ({where}) could not be read: {exc}"
    return list(cast("dict[str, Any]", answer).get("items") or []), None


def usage(items: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """One run's sample from its pods' PodMetrics, or none and why."""
    sample = reading(items)
    why = f"the metrics API ({GROUP}/{VERSION}) reported no usage for this run's pods"
    return sample, None if sample else why


def by_run(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """PodMetrics grouped by the run their pod belongs to (its experiment label, which the
    metrics API copies from the pod)."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        run = ((item.get("metadata") or {}).get("labels") or {}).get(names.EXPERIMENT)
        if run:
            runs.setdefault(run, []).append(item)
    return runs


def read(api: KubeApi, selector: str) -> tuple[dict[str, Any] | None, str | None]:
    """The run's pods' usage now (their label `selector`), or none and why."""
    items, why = listed(api, selector)
    return (None, why) if items is None else usage(items)
