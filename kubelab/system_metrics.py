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
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_INTERVAL = 5.0
"""Seconds between samples unless the spec's `system_metrics_interval` says otherwise."""

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


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete JSON object line; a torn last line (a sampler killed mid-write) is skipped."""
    if not path.is_file():
        return
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                return
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                yield line


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(lines: Iterable[dict[str, Any]]) -> SystemSummary:
    """Integrate samples: GPU-hours and energy by the time between consecutive samples."""
    summary = SystemSummary()
    previous_time: float | None = None
    previous_power: float | None = None
    utils: list[float] = []
    cpus: list[float] = []
    gpu_seconds = 0.0
    joules = 0.0
    measured_power = False
    idle = _IdleWatch()
    for line in lines:
        if "sources" in line:
            missing = line.get("missing")
            if isinstance(missing, dict):
                summary.missing.update({str(k): str(v) for k, v in missing.items()})
            continue
        time = _number(line.get("time"))
        if time is None:
            continue
        summary.samples += 1
        gpus = [g for g in line.get("gpus") or [] if isinstance(g, dict)]
        power = None
        sample_utils = []
        for gpu in gpus:
            util = _number(gpu.get("util"))
            if util is not None:
                sample_utils.append(util)
            memory = _number(gpu.get("memory_mib"))
            if memory is not None:
                summary.gpu_memory_peak_mib = max(summary.gpu_memory_peak_mib or 0.0, memory)
            watts = _number(gpu.get("power_w"))
            if watts is not None:
                power = (power or 0.0) + watts
        utils.extend(sample_utils)
        cpu = _number(line.get("cpu_percent"))
        if cpu is not None:
            cpus.append(cpu)
        rss = _number(line.get("rss_mib"))
        if rss is not None:
            summary.rss_peak_mib = max(summary.rss_peak_mib or 0.0, rss)
        if previous_time is not None and time > previous_time:
            elapsed = time - previous_time
            gpu_seconds += elapsed * len(gpus)
            if power is not None and previous_power is not None:
                joules += elapsed * (power + previous_power) / 2
                measured_power = True
        if sample_utils:
            label = f"GPU {gpus[0].get('index', 0)}" if len(gpus) == 1 else f"{len(gpus)} GPUs"
            idle.add(time, sum(sample_utils) / len(sample_utils), cpu, label)
        previous_time, previous_power = time, power
    if utils:
        summary.gpu_util = sum(utils) / len(utils)
        summary.gpu_util_p95 = percentile(utils, 95)
        summary.gpu_hours = gpu_seconds / 3600
    if measured_power:
        summary.energy_wh = joules / 3600
    if cpus:
        summary.cpu_percent = sum(cpus) / len(cpus)
    summary.notice = idle.notice
    return summary


def summarize_file(path: Path) -> SystemSummary:
    return summarize(read_lines(path))


class _IdleWatch:
    """Finds the first IDLE_WINDOW seconds whose mean GPU utilisation stayed under IDLE_UTIL."""

    def __init__(self) -> None:
        self.window: list[tuple[float, float, float | None]] = []
        self.notice: str | None = None

    def add(self, time: float, util: float, cpu: float | None, label: str) -> None:
        if self.notice is not None:
            return
        self.window.append((time, util, cpu))
        while self.window and time - self.window[0][0] > IDLE_WINDOW:
            self.window.pop(0)
        if time - self.window[0][0] < IDLE_WINDOW * 0.99:
            return
        mean = sum(u for _, u, _ in self.window) / len(self.window)
        if mean >= IDLE_UTIL:
            return
        cpus = [c for _, _, c in self.window if c is not None]
        minutes = round((time - self.window[0][0]) / 60)
        text = f"{label} averaged {mean:.0f}% over {minutes} min"
        if cpus:
            cpu = sum(cpus) / len(cpus)
            text += f" while CPU was {cpu:.0f}%"
            if cpu >= 90:
                text += ": input-bound?"
        self.notice = text


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
