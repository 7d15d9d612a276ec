"""A run's system samples as chart series: GPU utilisation, GPU memory and power over time.

The views draw a few hundred points per series, while a day of 5 s samples is 17,280 lines, so
the samples are cut into at most `points` equal-time buckets and each bucket shows its mean
(GPU memory and process memory their peak: a short spike to the limit is what a reader looks
for). A bucket where a GPU reported nothing holds None, drawn as a gap, never a zero; a stretch
of time with no samples at all has no bucket.

The samples come pre-bucketed from the run's digest (kubelab/system_digest.py: at most 2,048
buckets of sums, counts and peaks, saved beside the file and brought up to date with only the
lines appended since), so a view's read never decodes a day of samples; numpy regroups those
buckets into the `points` asked for (each digest bucket goes whole to the one its mean time
falls in).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kubelab import system_digest
from kubelab.system_digest import GPU_FIELDS, Buckets, gpu_series
from kubelab.system_metrics import SystemSummary

DEFAULT_POINTS = 500
"""Points per series unless the reader asks otherwise (a chart is a few hundred pixels wide)."""
MAX_POINTS = 5000
_GPU_SHOWN = tuple(zip(GPU_FIELDS, (False, True, False), strict=True))  # memory_mib shows its peak


def _listed(values: np.ndarray) -> list[float | None]:
    return [None if value != value else value for value in np.round(values, 2).tolist()]


def _column(values: Any, length: int) -> np.ndarray:
    """The first `length` buckets of a digest's array (each holds LIMIT), without a copy."""
    return np.frombuffer(values, dtype=np.float64)[:length]


def series(buckets: Buckets, points: int = DEFAULT_POINTS) -> dict[str, Any]:
    """`{time: [...], gpus: [{index, util, memory_mib, power_w}], cpu_percent, rss_mib}`:
    every list as long as `time` (epoch seconds, each bucket's mean sample time)."""
    time = buckets.series.get("time")
    if time is None:
        return {"time": [], "gpus": [], "cpu_percent": [], "rss_mib": []}
    length = buckets.length
    samples = _column(time[1], length)
    used = samples > 0
    moments = _column(time[0], length)[used] / samples[used]
    start, end = buckets.low, buckets.high
    out = min(max(1, points), len(moments))
    per_second = out / (end - start) if end > start else 0.0
    bucket = np.clip(((moments - start) * per_second).astype(np.int64), 0, out - 1)
    keep = np.bincount(bucket, minlength=out) > 0  # a stretch of time with no samples has no bucket

    def shown(name: str, peak: bool = False) -> list[float | None]:
        columns = buckets.series.get(name)
        if columns is None:
            return [None] * int(keep.sum())
        sums, counts, peaks = (_column(c, length)[used] for c in columns)
        read = np.bincount(bucket, weights=counts, minlength=out)
        if peak:
            result = np.full(out, -np.inf)
            np.maximum.at(result, bucket, peaks)
        else:
            result = np.bincount(bucket, weights=sums, minlength=out) / np.maximum(read, 1)
        result[read == 0] = np.nan
        return _listed(result[keep])

    return {
        "time": shown("time"),
        "gpus": [
            {"index": index, **{f: shown(gpu_series(index, f), p) for f, p in _GPU_SHOWN}}
            for index in buckets.gpus()
        ],
        "cpu_percent": shown("cpu_percent"),
        "rss_mib": shown("rss_mib", peak=True),
    }


def read_system(path: Path, points: int = DEFAULT_POINTS) -> dict[str, Any]:
    """What the views show of a run's `system.jsonl`: the sums (with what is missing and why, and
    the idle notice) and the series; a run with no file has empty series and no sums."""
    digest = system_digest.read(path)
    if digest is None or digest.buckets is None:
        return {"summary": SystemSummary().as_json(), "series": series(Buckets(), points)}
    with system_digest.LOCK:  # another reader may be folding new lines into the same digest
        return {"summary": digest.sums.result().as_json(), "series": series(digest.buckets, points)}
