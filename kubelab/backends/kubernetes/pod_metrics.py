"""A Kubernetes run's CPU and memory from the resource metrics API (`metrics.k8s.io/v1beta1`
PodMetrics, served by metrics-server or another adapter): each container's usage, summed over
the run's pods, as the sample fields the local sampler writes (`cpu_percent`: percent of one
core, so 250 is two and a half cores; `rss_mib`: the working set, the memory the kernel would
not reclaim).

The API keeps no history: it answers what the pods use now (a window of a few seconds to a
minute). A reading is taken each time a view follows the running run (`dcgm.LiveSamples`) and
appended to its `system.jsonl`; a run nobody follows while it runs has no CPU or memory samples.
Where the API is not served (no APIService), unavailable, or refused to the notebook's account,
the reading is none and says why: never zeros.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.errors import RetryPolicy, api_message, call
from kubelab.errors import KubelabError

GROUP, VERSION, PLURAL = "metrics.k8s.io", "v1beta1", "pods"
SOURCE = "metrics-api"
"""The `process` source a Kubernetes run's `system.jsonl` names when the readings come from here."""
ONCE = RetryPolicy(attempts=1)  # a view's read waits for no retries: the next poll asks again
MIB = 1024 * 1024


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


def read(api: KubeApi, selector: str) -> tuple[dict[str, Any] | None, str | None]:
    """The run's pods' usage now (their label `selector`), or none and why."""
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
    sample = reading(list(cast("dict[str, Any]", answer).get("items") or []))
    return sample, None if sample else f"the metrics API ({where}) reported no usage for this run's pods"
