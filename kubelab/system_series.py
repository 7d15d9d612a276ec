"""A run's system samples as chart series: GPU utilisation, GPU memory and power over time.

The views draw a few hundred points per series, while a day of 5 s samples is 17,280 lines, so
the samples are cut into at most `points` equal-time buckets and each bucket shows its mean
(GPU memory and process memory their peak: a short spike to the limit is what a reader looks
for). A bucket where a GPU reported nothing holds None, drawn as a gap, never a zero; a stretch
of time with no samples at all has no bucket.

A view re-reads a running run every few seconds, so the samples of the last files read are
kept as columns of floats beside their sums (`system_metrics.Accumulator`), and only the lines
appended since are decoded, once for both; the bucketing is numpy's, a few milliseconds for a day.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from kubelab.system_metrics import Accumulator, SystemSummary, decode_lines

DEFAULT_POINTS = 500
"""Points per series unless the reader asks otherwise (a chart is a few hundred pixels wide)."""
MAX_POINTS = 5000

GPU_FIELDS = ("util", "memory_mib", "power_w")
"""What the views chart per GPU (temperature stays in the file and the TensorBoard mirror)."""
_GPU_PEAKS = (False, True, False)  # memory_mib shows its peak


def _number(value: Any) -> float:
    """A sample's value as a float; NaN for what is missing or not a finite number."""
    kind = type(value)
    if kind is float:
        return value if -math.inf < value < math.inf else math.nan  # NaN compares false too
    return float(value) if kind is int else math.nan


class Columns:
    """A file's samples as aligned columns (NaN where a field was not read): appended to line by
    line, bucketed with numpy."""

    def __init__(self) -> None:
        self.time = array("d")
        self.cpu_percent = array("d")
        self.rss_mib = array("d")
        self.gpus: dict[int, tuple[array[float], array[float], array[float]]] = {}

    def extend(self, lines: list[dict[str, Any]]) -> None:
        time, cpu, rss, gpus = self.time, self.cpu_percent, self.rss_mib, self.gpus
        for line in lines:
            moment = _number(line.get("time"))
            if moment != moment:  # the sources line, or a sample without a time
                continue
            count = len(time)
            time.append(moment)
            cpu.append(_number(line.get("cpu_percent")))
            rss.append(_number(line.get("rss_mib")))
            for gpu in line.get("gpus") or ():
                index = gpu.get("index") if type(gpu) is dict else None
                if type(index) is not int:
                    continue
                columns = gpus.get(index)
                if columns is None:
                    gap = [math.nan] * count  # before this GPU's first sample
                    columns = gpus[index] = (array("d", gap), array("d", gap), array("d", gap))
                elif len(columns[0]) > count:  # the same index twice in one sample: the first counts
                    continue
                for field, column in zip(GPU_FIELDS, columns, strict=True):
                    column.append(_number(gpu.get(field)))
            for columns in gpus.values():
                if len(columns[0]) == count:  # not in this sample
                    for column in columns:
                        column.append(math.nan)


def _bucketed(values: np.ndarray, bucket: np.ndarray, buckets: int, peak: bool) -> np.ndarray:
    """Each bucket's mean (or peak) of the values that are numbers; NaN where it has none."""
    read = ~np.isnan(values)
    counts = np.bincount(bucket[read], minlength=buckets)
    if peak:
        result = np.full(buckets, -np.inf)
        np.maximum.at(result, bucket[read], values[read])
    else:
        result = np.bincount(bucket[read], weights=values[read], minlength=buckets) / np.maximum(counts, 1)
    result[counts == 0] = np.nan
    return result


def _listed(values: np.ndarray) -> list[float | None]:
    return [None if value != value else value for value in np.round(values, 2).tolist()]


def series(columns: Columns, points: int = DEFAULT_POINTS) -> dict[str, Any]:
    """`{time: [...], gpus: [{index, util, memory_mib, power_w}], cpu_percent, rss_mib}`:
    every list as long as `time` (epoch seconds, each bucket's mean sample time)."""
    time = np.frombuffer(columns.time, dtype=np.float64)
    if not len(time):
        return {"time": [], "gpus": [], "cpu_percent": [], "rss_mib": []}
    start, end = float(time.min()), float(time.max())
    buckets = min(max(1, points), len(time))
    per_second = buckets / (end - start) if end > start else 0.0
    bucket = np.clip(((time - start) * per_second).astype(np.int64), 0, buckets - 1)
    counts = np.bincount(bucket, minlength=buckets)
    keep = counts > 0  # a stretch of time with no samples has no bucket

    def shown(values: array[float], peak: bool = False) -> list[float | None]:
        return _listed(_bucketed(np.frombuffer(values, dtype=np.float64), bucket, buckets, peak)[keep])

    return {
        "time": shown(columns.time),
        "gpus": [
            {"index": index, **{f: shown(c, p) for f, c, p in zip(GPU_FIELDS, gpu, _GPU_PEAKS, strict=True)}}
            for index, gpu in sorted(columns.gpus.items())
        ],
        "cpu_percent": shown(columns.cpu_percent),
        "rss_mib": shown(columns.rss_mib, peak=True),
    }


class _Kept:
    """One file as read so far: its columns and its sums, fed the same decoded lines."""

    def __init__(self, inode: int) -> None:
        self.inode, self.offset = inode, 0
        self.columns, self.sums = Columns(), Accumulator()


_KEPT: OrderedDict[Path, _Kept] = OrderedDict()
_KEPT_FILES = 16  # ~0.7 MB for a day of one GPU's samples each
_LOCK = threading.Lock()  # the server reads on worker threads


def _read(path: Path) -> _Kept | None:
    """A `system.jsonl` folded so far, decoding only what was appended since this process last
    read it (a file that shrank or was replaced is read again); None where there is none."""
    try:
        info = path.stat()
    except OSError:
        return None
    with _LOCK:
        kept = _KEPT.pop(path, None)
        if kept is None or kept.inode != info.st_ino or info.st_size < kept.offset:
            kept = _Kept(info.st_ino)
        if info.st_size > kept.offset:
            with open(path, "rb") as handle:
                handle.seek(kept.offset)
                chunk = handle.read(info.st_size - kept.offset)
            complete = chunk[: chunk.rfind(b"\n") + 1]
            lines = decode_lines(complete)
            kept.columns.extend(lines)
            for line in lines:
                kept.sums.add(line)
            kept.offset += len(complete)
        _KEPT[path] = kept
        while len(_KEPT) > _KEPT_FILES:
            _KEPT.popitem(last=False)
        return kept


def read_system(path: Path, points: int = DEFAULT_POINTS) -> dict[str, Any]:
    """What the views show of a run's `system.jsonl`: the sums (with what is missing and why, and
    the idle notice) and the series; a run with no file has empty series and no sums."""
    kept = _read(path)
    if kept is None:
        return {"summary": SystemSummary().as_json(), "series": series(Columns(), points)}
    with _LOCK:  # another reader may be folding new lines into the same columns
        return {"summary": kept.sums.result().as_json(), "series": series(kept.columns, points)}
