"""A Kubernetes run's GPU samples from the cluster's monitoring: the NVIDIA DCGM exporter's
series (`DCGM_FI_DEV_GPU_UTIL`, `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_POWER_USAGE`) for the run's
pods, read through Prometheus's HTTP API and written as its `system.jsonl`, in the runner's
format, so every reader (sums, views, PQL, `kubelab show`) treats them alike. While the run
runs, a view's read appends what came since the last sample (`LiveSamples`, at most once an
interval), and the CPU and memory the metrics API reports (pod_metrics.py) are appended each
interval (by a server's sampler, metrics_sampler.py, or else on a view's read); when it ends, the
file is written again whole from its start to its end, keeping those (they have no history).

Prometheus is configured by `KUBELAB_PROMETHEUS_URL`. Where none is, or it does not answer, or
it has no series for the run's pods, the file says why once and holds no samples: never zeros.
The reader is a narrow interface (`RangeQuery`): tests feed it recorded answers.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kubelab import system_digest, system_metrics
from kubelab.backends.kubernetes import pod_metrics
from kubelab.records import RunDirectory, parse_iso

log = logging.getLogger(__name__)

PROMETHEUS_URL = "KUBELAB_PROMETHEUS_URL"
SERIES = {
    "util": "DCGM_FI_DEV_GPU_UTIL",
    "memory_mib": "DCGM_FI_DEV_FB_USED",
    "power_w": "DCGM_FI_DEV_POWER_USAGE",
}
"""Sample field -> the exporter's series (percent, MiB, W: the sample's own units)."""
MAX_POINTS = 10_000  # Prometheus refuses a range query of more than 11,000 points a series
NO_PROCESS = "no CPU or memory samples: the metrics API was not read while the run ran"
NO_PROMETHEUS = f"no Prometheus configured ({PROMETHEUS_URL}): no GPU metrics on Kubernetes"


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


def samples(
    results: dict[str, list[dict[str, Any]]], order: dict[tuple[str, str], int] | None = None
) -> list[dict[str, Any]]:
    """Sample lines from each field's matrix: a GPU is its (pod, `gpu` label), numbered from 0 in
    that order (`order`, kept across a running run's polls, keeps the numbers it gave and gives
    new GPUs the next); a field a GPU has no value for at a moment is left out, not zeroed."""
    moments: dict[float, dict[tuple[str, str], dict[str, float]]] = {}
    for field, matrix in results.items():
        for series in matrix:
            labels = series.get("metric") or {}
            gpu = (labels.get("exported_pod") or labels.get("pod", ""), labels.get("gpu", ""))
            for moment, value in series.get("values") or ():
                number = float(value)
                if number == number and abs(number) != float("inf"):
                    moments.setdefault(float(moment), {}).setdefault(gpu, {})[field] = number
    order = {} if order is None else order
    for gpu in sorted({gpu for seen in moments.values() for gpu in seen} - set(order)):
        order[gpu] = len(order)
    return [
        {"time": moment, "gpus": sorted(({"index": order[g], **f} for g, f in seen.items()), key=_index)}
        for moment, seen in sorted(moments.items())
    ]


def _index(gpu: dict[str, Any]) -> int:
    return int(gpu["index"])


def ask(
    source: RangeQuery | None,
    namespace: str,
    job: str,
    start: float,
    end: float,
    every: float,
    order: dict[tuple[str, str], int] | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """The run's samples between `start` and `end`, or none and why."""
    if source is None:
        return [], NO_PROMETHEUS
    step = max(every, (end - start) / MAX_POINTS, 1.0)
    try:
        results = {
            field: source.query_range(pods_query(series, namespace, job), start, end, step)
            for field, series in SERIES.items()
        }
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        return [], f"Prometheus at {source.where} did not answer: {exc}"
    lines = samples(results, order)
    return lines, None if lines else f"Prometheus at {source.where} has no DCGM series for this run's pods"


def header(gpu: bool, why: str | None, process: bool, process_why: str | None) -> dict[str, Any]:
    """The sources line: DCGM for the GPUs and the metrics API for CPU and memory where each gave
    samples, and why not where one did not."""
    sources = {"gpu": "dcgm"} if gpu else {}
    missing = {} if gpu or not why else {"gpu": why}
    if process:
        sources["process"] = pod_metrics.SOURCE
    else:
        missing["process"] = process_why or NO_PROCESS
    return system_metrics.sources_line(sources, missing)


def write(
    path: Path,
    lines: list[dict[str, Any]],
    why: str | None,
    process: list[dict[str, Any]] = [],  # noqa: B006 (read only)
    process_why: str | None = None,
) -> None:
    """The run's `system.jsonl` written whole: its sources line (why there are no GPU or no CPU
    and memory samples, where none), then the GPU and the process samples in time order; readers
    that kept the file before forget it."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    system_metrics.append(partial, header(bool(lines), why, bool(process), process_why))
    merged = sorted([*lines, *process], key=_time)
    with open(partial, "a") as handle:
        handle.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in merged)
    system_digest.forget(path)
    partial.replace(path)  # whole, for readers that fold the file as it grows


def _time(line: dict[str, Any]) -> float:
    return float(line["time"])


def kept_process(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The CPU and memory samples the file holds (lines without GPUs: the metrics API has no
    history, so a rewrite from Prometheus keeps them) and why there are none, where it says."""
    lines = system_metrics.read_lines(path) if path.exists() else []
    samples = [line for line in lines if "time" in line and "gpus" not in line]
    missing: dict[str, str] = next((ln["missing"] for ln in lines if isinstance(ln.get("missing"), dict)), {})
    return samples, None if samples else missing.get("process")


def record(
    path: Path, source: RangeQuery | None, namespace: str, job: str, start: float, end: float, every: float
) -> None:
    """Write the run's `system.jsonl` from the exporter's series between `start` and `end`, with
    the CPU and memory samples it held."""
    write(path, *ask(source, namespace, job, start, end, every), *kept_process(path))


def from_environ() -> RangeQuery | None:
    url = os.environ.get(PROMETHEUS_URL, "").strip()
    return PrometheusHttp(url) if url else None


def record_run(run: RunDirectory, namespace: str, job: str) -> None:
    """At a run's end: its GPU samples from `started_at` to `finished_at`, at the sampling
    interval (`KUBELAB_SYSTEM_METRICS_INTERVAL`; `0` records nothing, as for local runs)."""
    status = run.status()
    every = system_metrics.interval_for(run.spec().get("system_metrics_interval"))
    if not status.started_at or every <= 0:
        return
    end = parse_iso(status.finished_at) if status.finished_at else time.time()
    record(run.system_file, from_environ(), namespace, job, parse_iso(status.started_at), end, every)


class _Followed:
    def __init__(self, started_at: str, every: float) -> None:
        self.started_at = started_at
        self.every = every  # seconds between samples (the spec's, else the lab's)
        self.polled: float | None = None  # monotonic
        self.taken: float | None = None  # monotonic: the sampler's last reading handed in
        self.last: float | None = None  # the newest sample's time, once some were written
        self.order: dict[tuple[str, str], int] = {}
        self.process_last: float | None = None  # the newest CPU and memory sample's time
        self.header: dict[str, Any] | None = None  # the sources line written, once the file is
        self.why: str | None = None  # why there are no GPU samples, as the last read said
        self.process_why: str | None = None  # why there are no CPU and memory samples, as last said


Usage = Callable[[], tuple[dict[str, Any] | None, str | None]]
"""The run's CPU and memory now, or none and why (`pod_metrics.read`)."""


class LiveSamples:
    """A running run's samples while it runs. A view's read asks Prometheus, at most once an
    interval, for what came since the newest sample (from the run's start at first), and the
    metrics API for the CPU and memory the run's pods use now (or a server's sampler hands them
    in each interval, `take`), and appends the newer samples;
    while the sources line changes (until the first samples of each arrive, it says why there
    are none), the file is written whole. A server that restarts writes the GPU samples again
    from the start and keeps the CPU and memory ones (the metrics API has no history). One lock
    per run: a Prometheus slow to answer for one run holds up no other run's view."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.locks: dict[Path, threading.Lock] = {}
        self.followed: dict[Path, _Followed] = {}

    def _lock(self, run: RunDirectory) -> threading.Lock:
        with self.lock:
            return self.locks.setdefault(run.path, threading.Lock())

    def _followed(self, run: RunDirectory) -> _Followed | None:
        """The run's state while it runs and is sampled (held under its lock); None once ended,
        or where its interval is 0."""
        status = run.status()
        if not status.started_at or status.terminal:
            return None
        followed = self.followed.get(run.path)
        if followed is None or followed.started_at != status.started_at:  # resumed: a new start
            every = system_metrics.interval_for(run.spec().get("system_metrics_interval"))
            followed = self.followed[run.path] = _Followed(status.started_at, every)
        return followed if followed.every > 0 else None

    def interval(self, run: RunDirectory) -> float | None:
        """The running run's seconds between samples; None where it is not sampled."""
        with self._lock(run):
            followed = self._followed(run)
            return None if followed is None else followed.every

    def poll(self, run: RunDirectory, namespace: str, job: str, usage: Usage | None = None) -> None:
        """A view's read. Without `usage` the CPU and memory are the sampler's, and what it last
        said of them stays."""
        with self._lock(run):  # the run's end (`finish`) writes the file under the same lock
            followed = self._followed(run)
            now = self.clock()
            if followed is None or followed.polled is not None and now - followed.polled < followed.every:
                return
            every = followed.every
            followed.polled = now
            start = max(parse_iso(followed.started_at), followed.last or 0.0)
            lines, why = ask(from_environ(), namespace, job, start, time.time(), every, followed.order)
            if why is not None and followed.last is not None:
                log.info("no new DCGM samples for %s: %s", run.id, why)
            sample, process_why = usage() if usage else (None, followed.process_why)
            self._written(run, followed, lines, why, sample, process_why)

    def take(self, run: RunDirectory, usage: tuple[dict[str, Any] | None, str | None]) -> None:
        """The sampler's reading of the run's CPU and memory (`pod_metrics.usage`), appended; the
        GPUs stay as the last view's read left them (no Prometheus configured: said at once)."""
        with self._lock(run):
            followed = self._followed(run)
            now = self.clock()  # a run sampled less often than the round skips rounds (10% early is on time)
            if followed is None or followed.taken is not None and now - followed.taken < 0.9 * followed.every:
                return
            followed.taken = now
            unasked = NO_PROMETHEUS if from_environ() is None else None
            self._written(run, followed, [], followed.why if followed.polled is not None else unasked, *usage)

    def _written(
        self,
        run: RunDirectory,
        followed: _Followed,
        lines: list[dict[str, Any]],
        why: str | None,
        sample: dict[str, Any] | None,
        process_why: str | None,
    ) -> None:
        """Append what is newer than the file's samples, or write the file whole where its sources
        line changes (on a server's first poll of the run, always)."""
        path = run.system_file
        if followed.header is None:  # the CPU and memory samples an earlier server wrote stay
            kept = kept_process(path)[0]
            followed.process_last = max((_time(line) for line in kept), default=None)
        newer = [line for line in lines if followed.last is None or _time(line) > followed.last]
        if sample is not None and (followed.process_last is None or _time(sample) > followed.process_last):
            fresh = [sample]
        else:
            fresh = []
        followed.why, followed.process_why = why, process_why
        head = header(
            followed.last is not None or bool(newer),
            why,
            followed.process_last is not None or bool(fresh),
            process_why,
        )
        if head != followed.header:
            old = system_metrics.read_lines(path) if path.exists() else []
            gpus = [line for line in old if "gpus" in line] if followed.header is not None else []
            process = [line for line in old if "time" in line and "gpus" not in line]
            write(path, gpus + newer, why, process + fresh, process_why)
            followed.header = head
        elif newer or fresh:
            appended = sorted(newer + fresh, key=_time)
            with open(path, "a") as handle:
                handle.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in appended)
        if newer:
            followed.last = max(followed.last or _time(newer[-1]), _time(newer[-1]))
        if fresh:
            followed.process_last = _time(fresh[0])

    def finish(self, run: RunDirectory, namespace: str, job: str) -> None:
        """The run ended: its file written whole from its start to its end (`record_run`)."""
        with self._lock(run):
            self.followed.pop(run.path, None)
            record_run(run, namespace, job)
        with self.lock:  # a view after this finds the run ended and asks nothing
            self.locks.pop(run.path, None)
