"""What a run used of the machine: GPU and process samples in `system.jsonl`, and their sums.

The runner (or, on a cluster, the monitoring it is pointed at) appends one JSON line per
sample beside `metrics.jsonl`, never mixed with the user's metrics, so a chart of the user's
loss and one of GPU utilisation cannot be confused. The first line says which sources exist
(`{"sources": {"gpu": "nvml", "process": "psutil"}, "missing": {...}}`): where a source is
missing the run says so once and records nothing for it, never zeros or invented values.

A sample line: `{"time": 1700000000.0, "gpus": [{"index": 0, "util": 87.0, "memory_mib":
10240.0, "power_w": 250.5, "temperature_c": 61.0}], "cpu_percent": 99.1, "rss_mib": 812.0}`;
a field a source could not read is left out, not zeroed.

`summarize` integrates the samples once, for `kubelab show`, the views, tables and PQL
(`system.gpu_hours`, `system.energy_wh`, `system.gpu_util`, ...). Pure: only the standard
library, so every entry point can read a record without importing a sampler.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_INTERVAL = 5.0
"""Seconds between samples unless the spec's `system_metrics_interval` says otherwise."""
INTERVAL_ENV = "KUBELAB_SYSTEM_METRICS_INTERVAL"


def interval_from_env(default: float = DEFAULT_INTERVAL) -> float:
    """`KUBELAB_SYSTEM_METRICS_INTERVAL` seconds (`0`: sampling off), or `default`."""
    text = os.environ.get(INTERVAL_ENV)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        return default
    return value if value >= 0 else default


def interval_for(chosen: Any) -> float:
    """A run's seconds between samples: its spec's `system_metrics_interval` (`chosen`; `0`:
    none), else the lab's (`KUBELAB_SYSTEM_METRICS_INTERVAL`), else DEFAULT_INTERVAL."""
    usable = isinstance(chosen, (int, float)) and not isinstance(chosen, bool) and chosen >= 0
    return float(chosen) if usable else interval_from_env()


IDLE_UTIL = 15.0
"""A run whose GPUs average under this utilisation (percent) ..."""
IDLE_WINDOW = 600.0
"""... for this many seconds gets one notice that its GPUs wait for something."""


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment; None where the device or driver did not answer that field."""

    index: int
    util: float | None = None
    memory_mib: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None

    def as_json(self) -> dict[str, float | int]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class Sample:
    time: float
    gpus: tuple[GpuReading, ...] = ()
    cpu_percent: float | None = None
    rss_mib: float | None = None

    def as_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"time": round(self.time, 3)}
        if self.gpus:
            line["gpus"] = [gpu.as_json() for gpu in self.gpus]
        if self.cpu_percent is not None:
            line["cpu_percent"] = round(self.cpu_percent, 1)
        if self.rss_mib is not None:
            line["rss_mib"] = round(self.rss_mib, 1)
        return line


@dataclass
class SystemSummary:
    """A run's use of the machine, integrated over its samples (None: nothing measured)."""

    samples: int = 0
    gpu_hours: float | None = None
    energy_wh: float | None = None
    gpu_util: float | None = None
    """Mean utilisation over every sampled GPU, percent."""
    gpu_util_p95: float | None = None
    gpu_memory_peak_mib: float | None = None
    cpu_percent: float | None = None
    rss_peak_mib: float | None = None
    missing: dict[str, str] = field(default_factory=dict)
    """Sources that did not exist, with why (shown once instead of numbers)."""
    notice: str | None = None
    """One sentence when the GPUs sat mostly idle (input-bound, waiting on something)."""

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {
            k: (round(v, 4) if isinstance(v, float) else v) for k, v in data.items() if v not in (None, {})
        }


def sources_line(sources: dict[str, str], missing: dict[str, str]) -> dict[str, Any]:
    """The first line of `system.jsonl`: which sources are read, and why others are not."""
    return {"sources": sources, "missing": missing}


def append(path: Path, line: dict[str, Any]) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps(line, separators=(",", ":")) + "\n")


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON object line; a torn last line (a sampler killed mid-write) is skipped."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return []
    return decode_lines(data[: data.rfind(b"\n") + 1])


def decode_lines(complete: bytes) -> list[dict[str, Any]]:
    """Complete lines decoded as one JSON array (one call into the C decoder, several times
    faster than a call per line); a damaged line falls back to line by line, skipping it."""
    if not complete:
        return []
    try:
        decoded = json.loads(b"[" + complete.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except ValueError:
        decoded = []
        for raw in complete.splitlines():
            try:
                decoded.append(json.loads(raw))
            except ValueError:
                continue
    return [line for line in decoded if isinstance(line, dict)]


def _number(value: Any) -> float | None:
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    return float(value) if kind is int else None


class Accumulator:
    """Folds sample lines one at a time, so a reader that keeps it (or its `state` in the run's
    digest, kubelab/system_digest.py) only reads what was appended since: a day of 5 s samples
    is 17,280 lines. Utilisation is kept as counts per value, so p95 stays exact and small."""

    def __init__(self) -> None:
        self.summary = SystemSummary()
        self.previous_time: float | None = None
        self.previous_power: float | None = None
        self.util_counts: dict[float, int] = {}
        self.util_sum = 0.0
        self.util_count = 0
        self.cpu_sum = 0.0
        self.cpu_count = 0
        self.gpu_seconds = 0.0
        self.joules = 0.0
        self.memory_peak = -1.0
        self.rss_peak = -1.0
        self.measured_power = False
        self.idle = _IdleWatch()

    def add(self, line: dict[str, Any]) -> None:
        time = _number(line.get("time"))
        if time is None:
            if isinstance(line.get("missing"), dict):
                self.summary.missing.update({str(k): str(v) for k, v in line["missing"].items()})
            return
        self.summary.samples += 1
        gpus = line.get("gpus") or ()
        power = None
        counts = self.util_counts
        sample_sum, sample_count = 0.0, 0
        for gpu in gpus:
            if not isinstance(gpu, dict):
                continue
            util = _number(gpu.get("util"))
            if util is not None:
                counts[util] = counts.get(util, 0) + 1
                self.util_sum += util
                sample_sum += util
                sample_count += 1
            memory = _number(gpu.get("memory_mib"))
            if memory is not None and memory > self.memory_peak:
                self.memory_peak = memory
            watts = _number(gpu.get("power_w"))
            if watts is not None:
                power = (power or 0.0) + watts
        self.util_count += sample_count
        cpu = _number(line.get("cpu_percent"))
        if cpu is not None:
            self.cpu_sum += cpu
            self.cpu_count += 1
        rss = _number(line.get("rss_mib"))
        if rss is not None and rss > self.rss_peak:
            self.rss_peak = rss
        if sample_count and self.idle.notice is None:
            self.idle.add(time, sample_sum / sample_count, cpu, gpus)
        if "gpus" not in line:  # CPU and memory alone (the metrics API on Kubernetes, between
            return  # the GPU samples): GPU time runs from one GPU sample to the next
        previous = self.previous_time
        if previous is not None and time > previous:
            elapsed = time - previous
            self.gpu_seconds += elapsed * len(gpus)
            if power is not None and self.previous_power is not None:
                self.joules += elapsed * (power + self.previous_power) / 2
                self.measured_power = True
        self.previous_time, self.previous_power = time, power

    def result(self) -> SystemSummary:
        summary = SystemSummary(samples=self.summary.samples, missing=dict(self.summary.missing))
        if self.util_count:
            summary.gpu_util = self.util_sum / self.util_count
            summary.gpu_util_p95 = counted_percentile(self.util_counts, 95)
            summary.gpu_hours = self.gpu_seconds / 3600
        if self.measured_power:
            summary.energy_wh = self.joules / 3600
        if self.cpu_count:
            summary.cpu_percent = self.cpu_sum / self.cpu_count
        summary.gpu_memory_peak_mib = self.memory_peak if self.memory_peak >= 0 else None
        summary.rss_peak_mib = self.rss_peak if self.rss_peak >= 0 else None
        summary.notice = self.idle.notice
        return summary

    def state(self) -> dict[str, Any]:
        """Everything folded so far as JSON (floats round-trip exactly), for the run's digest."""
        return {
            "samples": self.summary.samples,
            "missing": self.summary.missing,
            "previous": [self.previous_time, self.previous_power],
            "utils": [[value, count] for value, count in self.util_counts.items()],
            "sums": [self.util_sum, self.util_count, self.cpu_sum, self.cpu_count],
            "integrals": [self.gpu_seconds, self.joules, self.measured_power],
            "peaks": [self.memory_peak, self.rss_peak],
            "idle": self.idle.state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Accumulator:
        """The inverse of `state`; raises (TypeError, ValueError, KeyError) on anything else."""
        folded = cls()
        folded.summary.samples = int(state["samples"])
        folded.summary.missing = {str(k): str(v) for k, v in dict(state["missing"]).items()}
        previous_time, previous_power = state["previous"]
        folded.previous_time = None if previous_time is None else float(previous_time)
        folded.previous_power = None if previous_power is None else float(previous_power)
        folded.util_counts = {float(value): int(count) for value, count in state["utils"]}
        util_sum, util_count, cpu_sum, cpu_count = state["sums"]
        folded.util_sum, folded.util_count = float(util_sum), int(util_count)
        folded.cpu_sum, folded.cpu_count = float(cpu_sum), int(cpu_count)
        gpu_seconds, joules, measured = state["integrals"]
        folded.gpu_seconds, folded.joules = float(gpu_seconds), float(joules)
        folded.measured_power = bool(measured)
        folded.memory_peak, folded.rss_peak = (float(peak) for peak in state["peaks"])
        folded.idle = _IdleWatch.from_state(state["idle"])
        return folded


def counted_percentile(counts: dict[float, int], q: float) -> float:
    """Nearest-rank percentile of values given as {value: how many times}, non-empty."""
    ordered = sorted(counts.items())
    rank = max(1, math.ceil(q / 100 * sum(counts.values())))
    seen = 0
    for value, count in ordered:
        seen += count
        if seen >= rank:
            return value
    return ordered[-1][0]


def summarize(lines: Iterable[dict[str, Any]]) -> SystemSummary:
    """Integrate samples: GPU-hours and energy by the time between consecutive samples."""
    accumulator = Accumulator()
    for line in lines:
        accumulator.add(line)
    return accumulator.result()


class _IdleWatch:
    """Finds the first IDLE_WINDOW seconds whose mean GPU utilisation stayed under IDLE_UTIL
    (a sliding window with running sums: one pass over a day of samples)."""

    def __init__(self) -> None:
        self.window: deque[tuple[float, float, float | None]] = deque()
        self.util_sum = 0.0
        self.cpu_sum = 0.0
        self.cpu_count = 0
        self.notice: str | None = None

    def add(self, time: float, util: float, cpu: float | None, gpus: Any) -> None:
        if self.notice is not None:
            return
        self.window.append((time, util, cpu))
        self._count(util, cpu, 1)
        while time - self.window[0][0] > IDLE_WINDOW:
            _, old_util, old_cpu = self.window.popleft()
            self._count(old_util, old_cpu, -1)
        span = time - self.window[0][0]
        if span < IDLE_WINDOW * 0.99:
            return
        mean = self.util_sum / len(self.window)
        if mean >= IDLE_UTIL:
            return
        label = f"GPU {gpus[0].get('index', 0)}" if len(gpus) == 1 else f"{len(gpus)} GPUs"
        text = f"{label} averaged {mean:.0f}% over {round(span / 60)} min"
        if self.cpu_count:
            cpu_mean = self.cpu_sum / self.cpu_count
            text += f" while CPU was {cpu_mean:.0f}%"
            if cpu_mean >= 90:
                text += ": input-bound?"
        self.notice = text
        self.window.clear()  # not needed once the notice is given

    def state(self) -> dict[str, Any]:
        return {
            "window": [list(entry) for entry in self.window],
            "sums": [self.util_sum, self.cpu_sum, self.cpu_count],
            "notice": self.notice,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> _IdleWatch:
        watch = cls()
        for time, util, cpu in state["window"]:
            watch.window.append((float(time), float(util), None if cpu is None else float(cpu)))
        util_sum, cpu_sum, cpu_count = state["sums"]
        watch.util_sum, watch.cpu_sum, watch.cpu_count = float(util_sum), float(cpu_sum), int(cpu_count)
        notice = state["notice"]
        watch.notice = None if notice is None else str(notice)
        return watch

    def _count(self, util: float, cpu: float | None, sign: int) -> None:
        self.util_sum += sign * util
        if cpu is not None:
            self.cpu_sum += sign * cpu
            self.cpu_count += sign


SYSTEM_FIELDS = (
    "gpu_hours",
    "energy_wh",
    "gpu_util",
    "gpu_util_p95",
    "gpu_memory_peak_mib",
    "cpu_percent",
    "rss_peak_mib",
)
"""The sums a run record carries (`system.*` in PQL; run_record.System declares their kinds)."""


def system_fields(summary: SystemSummary) -> dict[str, float | None]:
    """The record's `system` section: each sum rounded, None where nothing was measured."""
    values = {name: getattr(summary, name) for name in SYSTEM_FIELDS}
    return {name: None if value is None else round(value, 4) for name, value in values.items()}


def describe(summary: SystemSummary) -> list[str]:
    """Readable lines for `kubelab show`: what was measured, and why anything was not."""
    parts = []
    if summary.gpu_util is not None:
        parts.append(f"GPU {summary.gpu_util:.0f}% mean (p95 {summary.gpu_util_p95 or 0:.0f}%)")
    if summary.gpu_hours is not None:
        parts.append(f"{summary.gpu_hours:.3g} GPU-hours")
    if summary.energy_wh is not None:
        parts.append(f"{summary.energy_wh:.3g} Wh")
    if summary.gpu_memory_peak_mib is not None:
        parts.append(f"peak GPU memory {summary.gpu_memory_peak_mib:.0f} MiB")
    if summary.cpu_percent is not None:
        parts.append(f"CPU {summary.cpu_percent:.0f}%")
    if summary.rss_peak_mib is not None:
        parts.append(f"peak memory {summary.rss_peak_mib:.0f} MiB")
    lines = [", ".join(parts)] if parts else []
    lines += [f"no {source} metrics: {why}" for source, why in sorted(summary.missing.items())]
    if summary.notice:
        lines.append(summary.notice)
    return lines
