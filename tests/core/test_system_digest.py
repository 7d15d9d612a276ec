"""The digest beside `system.jsonl`: a reader that finds it decodes only the lines after it, and
gets the same sums and series as one that decodes every line; a stale or damaged one is rebuilt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubelab import system_digest
from kubelab.backends.local.system_sampler import SystemSampler
from kubelab.system_digest import LIMIT, digest_path, summarize_file
from kubelab.system_metrics import SystemSummary, read_lines, summarize
from kubelab.system_series import read_system


def _new_process() -> None:
    """Forget what this process kept, as a server that never read the run."""
    system_digest._KEPT.clear()
    system_digest._SUMS.clear()


def _day(lines: int) -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = [{"sources": {"gpu": "nvml", "process": "psutil"}, "missing": {}}]
    for i in range(lines):
        gpu: dict[str, Any] = {"index": 0, "util": float(3 if 2000 < i < 2400 else 40 + i % 57)}
        gpu["memory_mib"] = 90_000.0 if i == 7_777 else 1000.0 + i % 13
        if i % 11:
            gpu["power_w"] = 200.0 + i % 7
        second = {"index": 1, "util": float(i % 5)}
        sample = {"time": 1.7e9 + 5 * i, "gpus": [gpu, second], "cpu_percent": 99.0 + i % 3, "rss_mib": 800.0}
        samples.append(sample)
    return samples


def _write(path: Path, lines: list[dict[str, Any]], mode: str = "w") -> None:
    with open(path, mode) as handle:
        handle.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def _full(path: Path, points: int) -> dict[str, Any]:
    """What a reader that decodes every line answers: a copy of the file in a folder of its own."""
    alone = path.parent / "alone"
    alone.mkdir(exist_ok=True)
    copy = alone / path.name
    copy.write_bytes(path.read_bytes())
    digest_path(copy).unlink(missing_ok=True)
    return read_system(copy, points)


def test_a_saved_digest_gives_the_same_sums_and_series_decoding_only_the_lines_after_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "system.jsonl"
    day = _day(17_280)
    _write(path, day[:15_001])
    system_digest.read(path, save_after=1)  # what the runner's sampler saves each minute
    _write(path, day[15_001:], "a")
    expected = _full(path, 700)
    _new_process()
    assert expected["summary"] == summarize(day).as_json()
    assert expected["summary"]["notice"].startswith("2 GPUs averaged")  # the idle stretch, found once

    digest = system_digest.read(path, save_after=10**6)  # a server's first read: the tail only
    assert digest is not None and digest.buckets is not None
    assert digest.offset == path.stat().st_size
    _new_process()
    read = read_system(path, 700)
    assert read == expected
    assert 350 < len(read["series"]["time"]) <= 700
    assert max(read["series"]["gpus"][0]["memory_mib"]) == 90_000.0  # a 5 s spike kept as a peak

    # Damage a covered line in place (same length): only a reader that decodes it would see it.
    data = bytearray(path.read_bytes())
    middle = data.index(b'"util":41.0')
    data[middle : middle + 11] = b'"util":99.0'
    path.write_bytes(bytes(data))
    _new_process()
    assert read_system(path, 700) == expected
    assert summarize_file(path) == summarize(day)


def test_the_digest_follows_appends_and_is_rebuilt_when_stale_or_damaged(tmp_path: Path) -> None:
    path = tmp_path / "system.jsonl"
    day = _day(3_000)
    _write(path, day[:1_000])
    first = read_system(path)  # folded 1,000 lines itself: saves the digest for the next reader
    assert digest_path(path).exists() and first["summary"]["samples"] == 999
    _write(path, day[1_000:], "a")
    _new_process()
    assert read_system(path, 300) == _full(path, 300)

    path.write_text("".join(json.dumps(line) + "\n" for line in day[:50]))  # replaced, shorter
    _new_process()
    assert summarize_file(path) == summarize(day[:50])

    system_digest.read(path, save_after=1)
    digest = digest_path(path)
    digest.write_bytes(digest.read_bytes()[:-8])  # cut short
    _new_process()
    assert read_system(path) == _full(path, 500)
    digest.write_text('{"version": 1, "inode": "x"}\n')  # not a digest of this file
    _new_process()
    assert summarize_file(path) == summarize(day[:50])
    _new_process()
    path.unlink()
    assert summarize_file(path) == SystemSummary()


def test_the_sampler_saves_the_digest_when_the_run_ends(tmp_path: Path) -> None:
    path = tmp_path / "system.jsonl"
    sampler = SystemSampler(path, [], 0.05)
    with sampler:
        pass
    assert digest_path(path).exists()
    header = json.loads(digest_path(path).read_bytes().split(b"\n", 1)[0])
    assert header["offset"] == path.stat().st_size and header["sums"]["samples"] == len(read_lines(path)) - 1


def test_buckets_merge_pairwise_so_their_counts_and_peaks_stay_exact() -> None:
    buckets = system_digest.Buckets()
    for i in range(40_000):
        buckets.add(
            {"time": 10.0 * i, "gpus": [{"index": 0, "util": float(i % 100), "memory_mib": float(i)}]}
        )
    sums, counts, peaks = buckets.series["gpu0/util"]
    assert LIMIT // 2 <= buckets.length <= LIMIT and sum(counts) == 40_000
    assert buckets.width == 256.0  # 1/16 s doubled until 400,000 s fit in 2,048 buckets
    assert sum(sums) == pytest.approx(sum(float(i % 100) for i in range(40_000)))
    assert max(buckets.series["gpu0/memory_mib"][2]) == 39_999.0
    assert buckets.series["time"][1] == counts  # every sample read a utilisation
