"""A Kubernetes run's GPU samples from the cluster's monitoring: the NVIDIA DCGM exporter's
series (`DCGM_FI_DEV_GPU_UTIL`, `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_POWER_USAGE`) for the run's
pods, read through Prometheus's HTTP API when the run ends and written as its `system.jsonl`,
in the runner's format, so every reader (sums, views, PQL, `kubelab show`) treats them alike.

Prometheus is configured by `KUBELAB_PROMETHEUS_URL`. Where none is, or it does not answer, or
it has no series for the run's pods, the file says why once and holds no samples: never zeros.
The reader is a narrow interface (`RangeQuery`): tests feed it recorded answers.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Protocol

from kubelab import system_metrics
from kubelab.records import RunDirectory, parse_iso

PROMETHEUS_URL = "KUBELAB_PROMETHEUS_URL"
SERIES = {
    "util": "DCGM_FI_DEV_GPU_UTIL",
    "memory_mib": "DCGM_FI_DEV_FB_USED",
    "power_w": "DCGM_FI_DEV_POWER_USAGE",
}
"""Sample field -> the exporter's series (percent, MiB, W: the sample's own units)."""
MAX_POINTS = 10_000  # Prometheus refuses a range query of more than 11,000 points a series
NO_PROCESS = "CPU and memory are not read on Kubernetes"


class RangeQuery(Protocol):
    """Prometheus's `/api/v1/query_range`: the `data.result` matrix of a PromQL query."""

    where: str

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]: ...


class PrometheusHttp:
    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.where = url.rstrip("/")
        self.timeout = timeout

    def query_range(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        url = f"{self.where}/api/v1/query_range?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=self.timeout) as response:
            reply = json.loads(response.read())
        if reply.get("status") != "success":
            raise RuntimeError(f"{reply.get('errorType')}: {reply.get('error')}")
        result: list[dict[str, Any]] = reply["data"]["result"]
        return result


def pods_query(series: str, namespace: str, job: str) -> str:
    """The series of the run's pods (`<job>-...`): labelled `exported_*` where Prometheus scrapes
    the exporter without honorLabels, plain `namespace`/`pod` where it keeps them."""
    pods = re.escape(job).replace("\\", "\\\\") + "-.+"  # a PromQL string: its backslashes doubled
    return (
        f'{series}{{exported_namespace="{namespace}",exported_pod=~"{pods}"}}'
        f' or {series}{{namespace="{namespace}",pod=~"{pods}"}}'
    )


def samples(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Sample lines from each field's matrix: a GPU is its (pod, `gpu` label), numbered in that
    order from 0; a field a GPU has no value for at a moment is left out, not zeroed."""
    moments: dict[float, dict[tuple[str, str], dict[str, float]]] = {}
    for field, matrix in results.items():
        for series in matrix:
            labels = series.get("metric") or {}
            gpu = (labels.get("exported_pod") or labels.get("pod", ""), labels.get("gpu", ""))
            for moment, value in series.get("values") or ():
                number = float(value)
                if number == number and abs(number) != float("inf"):
                    moments.setdefault(float(moment), {}).setdefault(gpu, {})[field] = number
    order = {gpu: i for i, gpu in enumerate(sorted({gpu for seen in moments.values() for gpu in seen}))}
    return [
        {"time": moment, "gpus": [{"index": order[gpu], **fields} for gpu, fields in sorted(seen.items())]}
        for moment, seen in sorted(moments.items())
    ]


def record(
    path: Path, source: RangeQuery | None, namespace: str, job: str, start: float, end: float, every: float
) -> None:
    """Write the run's `system.jsonl` from the exporter's series between `start` and `end`."""
    missing = {"process": NO_PROCESS}
    lines: list[dict[str, Any]] = []
    if source is None:
        missing["gpu"] = f"no Prometheus configured ({PROMETHEUS_URL}): no GPU metrics on Kubernetes"
    else:
        step = max(every, (end - start) / MAX_POINTS, 1.0)
        try:
            results = {
                field: source.query_range(pods_query(series, namespace, job), start, end, step)
                for field, series in SERIES.items()
            }
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            missing["gpu"] = f"Prometheus at {source.where} did not answer: {exc}"
        else:
            lines = samples(results)
            if not lines:
                missing["gpu"] = f"Prometheus at {source.where} has no DCGM series for this run's pods"
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    sources = {"gpu": "dcgm"} if lines else {}
    system_metrics.append(partial, system_metrics.sources_line(sources, missing))
    with open(partial, "a") as handle:
        handle.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
    partial.replace(path)  # whole, for readers that fold the file as it grows


def from_environ() -> RangeQuery | None:
    url = os.environ.get(PROMETHEUS_URL, "").strip()
    return PrometheusHttp(url) if url else None


def record_run(run: RunDirectory, namespace: str, job: str) -> None:
    """At a run's end: its GPU samples from `started_at` to `finished_at`, at the sampling
    interval (`KUBELAB_SYSTEM_METRICS_INTERVAL`; `0` records nothing, as for local runs)."""
    status = run.status()
    every = system_metrics.interval_from_env()
    if not status.started_at or every <= 0:
        return
    end = parse_iso(status.finished_at) if status.finished_at else time.time()
    record(run.system_file, from_environ(), namespace, job, parse_iso(status.started_at), end, every)
