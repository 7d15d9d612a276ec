"""A run's system samples folded into a small digest beside `system.jsonl`, so no reader decodes a
day of samples again.

A day of 5 s samples is 17,280 JSON lines, a few hundred milliseconds to decode: too slow for a
view, and for a server that lists every run's sums. The digest (`system.digest`) holds what every
reader needs of the lines it covers: the sums' running state (`system_metrics.Accumulator`) and the
samples pre-aggregated into at most `LIMIT` equal-time buckets (each series' sum, count and peak
per bucket; when a run outgrows them, neighbours merge and the width doubles, so means and peaks
stay exact per bucket), with how many bytes of the file it covers. A reader folds only the lines
after that; the runner's sampler saves the digest about once a minute and when the run ends, and a
reader that had to fold many lines itself (a run older than digests, the cluster's DCGM samples)
saves it once for the next. It is a cache: missing, stale or damaged, it is rebuilt from the
samples, which stay the record.

Format: one JSON line (what it covers, the sums' state, the buckets' shape), then each series'
sums, counts and peaks as little-endian float64 arrays, so loading is a read and three `frombytes`
per series. Only the standard library: `kubelab show` and the run index read it too.
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import sys
import tempfile
import threading
import zlib
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import Any

from kubelab.system_metrics import Accumulator, SystemSummary, decode_lines

DIGEST_NAME = "system.digest"
VERSION = 1
LIMIT = 2048
"""Buckets at most: a chart is at most a couple of thousand pixels wide."""
FIRST_WIDTH = 1 / 16
"""Seconds a bucket spans before the run outgrows LIMIT of them (each sample its own bucket)."""
SAVE_AFTER = 500
"""Lines a reader folded itself before it saves the digest for the next reader."""
GPU_FIELDS = ("util", "memory_mib", "power_w")
"""What is bucketed per GPU (temperature stays in the file and the TensorBoard mirror)."""
_CHECKED = 256  # bytes before the covered end that must still be the same


def gpu_series(index: int, field: str) -> str:
    return f"gpu{index}/{field}"


def _number(value: Any) -> float | None:
    kind = type(value)
    if kind is float:
        return value if -math.inf < value < math.inf else None
    return float(value) if kind is int else None


class Buckets:
    """Samples in equal-time buckets from the first one: per series, each bucket's sum, count
    of values read and peak (`time` counts the samples). A missing value adds nothing. Each
    series holds LIMIT buckets from the start (48 KB), of which the first `length` are used."""

    def __init__(self, origin: float | None = None, width: float = FIRST_WIDTH) -> None:
        self.origin = origin
        self.width = width
        self.length = 0
        self.low, self.high = math.inf, -math.inf
        self.series: dict[str, tuple[array[float], array[float], array[float]]] = {}

    def add(self, line: dict[str, Any]) -> None:
        moment = _number(line.get("time"))
        if moment is None:  # the sources line, or a sample without a time
            return
        if self.origin is None:
            self.origin = moment
        bucket = max(0, int((moment - self.origin) / self.width))
        while bucket >= LIMIT:
            self._double()
            bucket = max(0, int((moment - self.origin) / self.width))
        if bucket >= self.length:
            self.length = bucket + 1
        if moment < self.low:
            self.low = moment
        if moment > self.high:
            self.high = moment
        put = self._put
        put("time", bucket, moment)
        for name in ("cpu_percent", "rss_mib"):
            value = _number(line.get(name))
            if value is not None:
                put(name, bucket, value)
        seen = set()
        for gpu in line.get("gpus") or ():
            index = gpu.get("index") if type(gpu) is dict else None
            if type(index) is not int or index in seen:  # the same index twice: the first counts
                continue
            seen.add(index)
            for field in GPU_FIELDS:
                value = _number(gpu.get(field))
                if value is not None:
                    put(f"gpu{index}/{field}", bucket, value)

    def _put(self, name: str, bucket: int, value: float) -> None:
        columns = self.series.get(name)
        if columns is None:
            columns = self.series[name] = _empty(LIMIT)
        sums, counts, peaks = columns
        sums[bucket] += value
        counts[bucket] += 1
        if value > peaks[bucket]:
            peaks[bucket] = value

    def _double(self) -> None:
        """Twice as wide: bucket i takes what buckets 2i and 2i+1 held."""
        self.width *= 2
        self.length = (self.length + 1) // 2
        rest = _empty(LIMIT // 2)
        for name, (sums, counts, peaks) in self.series.items():
            self.series[name] = (
                array("d", map(operator.add, sums[0::2], sums[1::2])) + rest[0],
                array("d", map(operator.add, counts[0::2], counts[1::2])) + rest[1],
                array("d", map(max, peaks[0::2], peaks[1::2])) + rest[2],
            )

    def gpus(self) -> list[int]:
        return sorted({int(name[3:].split("/", 1)[0]) for name in self.series if name.startswith("gpu")})


def _empty(length: int) -> tuple[array[float], array[float], array[float]]:
    zeros = bytes(8 * length)
    return array("d", zeros), array("d", zeros), array("d", [-math.inf]) * length


class Digest:
    """What a reader knows of one file: the bytes it covers, and the sums and buckets of them."""

    def __init__(self, inode: int, buckets: Buckets | None) -> None:
        self.inode, self.offset, self.check = inode, 0, 0
        self.sums = Accumulator()
        self.buckets = buckets

    def fold(self, lines: list[dict[str, Any]]) -> None:
        sums, buckets = self.sums, self.buckets
        for line in lines:
            sums.add(line)
            if buckets is not None:
                buckets.add(line)


def _check(path: Path, offset: int) -> int:
    """A checksum of the bytes just before `offset`: a file rewritten since has other ones."""
    with open(path, "rb") as handle:
        handle.seek(max(0, offset - _CHECKED))
        return zlib.crc32(handle.read(min(offset, _CHECKED)))


def digest_path(path: Path) -> Path:
    return path.with_name(DIGEST_NAME)


def save(path: Path, digest: Digest) -> None:
    """Write the digest beside the file, whole (a reader never sees half of one)."""
    buckets = digest.buckets
    if buckets is None:
        return
    names = sorted(buckets.series)
    header = {
        "version": VERSION,
        "inode": digest.inode,
        "offset": digest.offset,
        "check": digest.check,
        "sums": digest.sums.state(),
        "buckets": {
            "origin": buckets.origin,
            "width": buckets.width,
            "span": [buckets.low, buckets.high] if buckets.origin is not None else None,
            "length": buckets.length,
            "series": names,
        },
    }
    target = digest_path(path)
    # A fresh name of its own (O_EXCL: never through a link someone left in the folder).
    descriptor, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
            for name in names:
                for column in buckets.series[name]:
                    used = column[: buckets.length]
                    if sys.byteorder != "little":
                        used.byteswap()
                    handle.write(used.tobytes())
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def load(path: Path, inode: int, size: int, with_buckets: bool) -> Digest | None:
    """The saved digest of this very file, or None (none, another file's, damaged)."""
    try:
        with open(digest_path(path), "rb") as handle:
            header = json.loads(handle.readline())
            body = handle.read() if with_buckets else b""
        if header.get("version") != VERSION or header["inode"] != inode or not 0 < header["offset"] <= size:
            return None
        digest = Digest(inode, None)
        digest.offset, digest.check = int(header["offset"]), int(header["check"])
        if _check(path, digest.offset) != digest.check:
            return None
        digest.sums = Accumulator.from_state(header["sums"])
        if with_buckets:
            digest.buckets = _buckets(header["buckets"], body)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return digest


def _buckets(shape: dict[str, Any], body: bytes) -> Buckets:
    origin = shape["origin"]
    buckets = Buckets(None if origin is None else float(origin), float(shape["width"]))
    if shape["span"] is not None:
        buckets.low, buckets.high = (float(moment) for moment in shape["span"])
    length = buckets.length = int(shape["length"])
    if not 0 <= length <= LIMIT or len(body) != 3 * 8 * length * len(shape["series"]):
        raise ValueError("a digest whose arrays are not the length its header says")
    rest = _empty(LIMIT - length)
    for at, name in enumerate(shape["series"]):
        columns = []
        for part in range(3):
            column = array("d")
            start = (3 * at + part) * 8 * length
            column.frombytes(body[start : start + 8 * length])
            if sys.byteorder != "little":
                column.byteswap()
            columns.append(column + rest[part])
        buckets.series[str(name)] = (columns[0], columns[1], columns[2])
    return buckets


_KEPT: OrderedDict[Path, Digest] = OrderedDict()
_KEPT_FILES = 16  # with buckets: 48 KB a series each
_SUMS: OrderedDict[Path, Digest] = OrderedDict()
_SUMS_FILES = 512  # sums only, for the run index
LOCK = threading.Lock()  # the server reads on worker threads


def read(path: Path, with_buckets: bool = True, save_after: int = SAVE_AFTER) -> Digest | None:
    """The file's digest brought up to date: kept in this process, else the saved one, else
    built from the samples; only the lines after what it covers are decoded. A file that
    shrank or was replaced is folded again. Saved when this read folded `save_after` lines or
    more. None where there is no file."""
    try:
        info = path.stat()
    except OSError:
        return None
    kept_files = _KEPT if with_buckets else _SUMS
    with LOCK:
        digest = kept_files.pop(path, None)
        if digest is None and not with_buckets:
            digest = _KEPT.get(path)  # a view's read serves the sums too
        if digest is not None and (digest.inode != info.st_ino or info.st_size < digest.offset):
            digest = None
        if digest is None:
            digest = load(path, info.st_ino, info.st_size, with_buckets)
        if digest is None:
            digest = Digest(info.st_ino, Buckets())  # built whole: worth saving
        folded = 0
        if info.st_size > digest.offset:
            with open(path, "rb") as handle:
                handle.seek(digest.offset)
                chunk = handle.read(info.st_size - digest.offset)
            complete = chunk[: chunk.rfind(b"\n") + 1]
            lines = decode_lines(complete)
            digest.fold(lines)
            folded = len(lines)
            if complete:
                digest.offset += len(complete)
                digest.check = _check(path, digest.offset)
        if digest.buckets is not None and folded and folded >= save_after:
            with contextlib.suppress(OSError):  # a folder this reader may not write: the next folds again
                save(path, digest)
        if with_buckets:
            kept_files[path] = digest
        else:
            if digest.buckets is not None and path not in _KEPT:
                _SUMS[path] = _sums_only(digest)
            elif path not in _KEPT:
                _SUMS[path] = digest
        for kept, limit in ((_KEPT, _KEPT_FILES), (_SUMS, _SUMS_FILES)):
            while len(kept) > limit:
                kept.popitem(last=False)
        return digest


def _sums_only(digest: Digest) -> Digest:
    light = Digest(digest.inode, None)
    light.offset, light.check, light.sums = digest.offset, digest.check, digest.sums
    return light


def summarize_file(path: Path) -> SystemSummary:
    """The sums of a run's `system.jsonl` (`system_metrics.summarize` of its lines), reading only
    the digest and what was appended since."""
    digest = read(path, with_buckets=False)
    if digest is None:
        return SystemSummary()
    with LOCK:  # another reader may be folding new lines into the same sums
        return digest.sums.result()


def forget(path: Path) -> None:
    """Drop what this process and the folder know of a file about to be replaced."""
    with LOCK:
        _KEPT.pop(path, None)
        _SUMS.pop(path, None)
    digest_path(path).unlink(missing_ok=True)
