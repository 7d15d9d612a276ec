"""A run's system samples as chart series: recorded NVML answers in, bucketed series out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recorded_nvml import RecordedNvml

from kubelab import system_metrics
from kubelab.backends.local.system_sampler import NvmlReader, SystemSampler
from kubelab.system_digest import Buckets
from kubelab.system_series import read_system, series


def _sampled(path: Path, samples: int) -> None:
    """What the runner writes: its sources line, then one sample per tick (recorded NVML)."""
    clock = iter([100.0 + 5 * i for i in range(samples)]).__next__
    sampler = SystemSampler(path, [0, 1], 5.0, NvmlReader(RecordedNvml()), process_reader=None, clock=clock)
    with sampler:
        pass
    for _ in range(samples):
        system_metrics.append(path, sampler.sample().as_json())


def test_each_gpu_is_a_series_in_its_units_and_an_unread_field_is_a_gap(tmp_path: Path) -> None:
    path = tmp_path / "system.jsonl"
    _sampled(path, 4)
    read = read_system(path)
    shown = read["series"]
    assert shown["time"] == [100.0, 105.0, 110.0, 115.0]
    h100, t4 = shown["gpus"]
    assert h100 == {
        "index": 0,
        "util": [0.0, 87.0, 91.0, 95.0],
        "memory_mib": [512.0, 10240.0, 10240.0, 12288.0],
        "power_w": [70.25, 250.5, 290.0, 310.0],
    }
    assert t4["util"] == [3.0, 5.0, 4.0, 6.0] and t4["power_w"] == [None] * 4  # not supported: no zeros
    assert shown["cpu_percent"] == [None] * 4  # no process reader
    assert read["summary"]["gpu_memory_peak_mib"] == 12288.0 and read["summary"]["samples"] == 4


def test_a_day_is_cut_into_buckets_of_means_with_peaks_kept_and_gaps_left_out(tmp_path: Path) -> None:
    lines: list[dict[str, Any]] = [{"sources": {"gpu": "nvml"}, "missing": {}}]
    for i in range(17_280):
        gpu: dict[str, Any] = {"index": 0, "util": 20.0 if i % 2 else 60.0, "memory_mib": 1000.0}
        if i == 9_001:
            gpu["memory_mib"] = 70_000.0  # one 5 s spike
        if i < 3_000:
            gpu["power_w"] = 100.0
        lines.append({"time": 1.7e9 + 5 * i + (7200 if i >= 12_000 else 0), "gpus": [gpu]})
    path = tmp_path / "system.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"time": 2e9, "gp')
    shown = read_system(path, points=400)["series"]
    times, (gpu0,) = shown["time"], shown["gpus"]
    assert 350 <= len(times) <= 400 and len(gpu0["util"]) == len(times)
    assert times == sorted(times) and times[-1] < 2e9  # the torn last line is not read
    utils = sorted(u for u in gpu0["util"] if u is not None)
    assert len(utils) == len(times) and utils[0] >= 20.0 and utils[-1] <= 60.0
    assert abs(utils[len(utils) // 2] - 40.0) < 1.0  # each bucket the mean of its 20s and 60s
    assert max(gpu0["memory_mib"]) == 70_000.0 and gpu0["memory_mib"].count(70_000.0) == 1
    assert gpu0["power_w"][0] == 100.0 and gpu0["power_w"][-1] is None
    steps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(steps) > 7200 > 3 * sorted(steps)[len(steps) // 2]  # the two hours without samples


def test_no_file_or_no_samples_is_empty_series_never_zeros(tmp_path: Path) -> None:
    assert read_system(tmp_path / "system.jsonl") == {
        "summary": {"samples": 0},
        "series": {"time": [], "gpus": [], "cpu_percent": [], "rss_mib": []},
    }
    missing = [{"sources": {}, "missing": {"gpu": "no NVML"}}]
    buckets = Buckets()
    buckets.add(missing[0])
    assert series(buckets)["gpus"] == []
    path = tmp_path / "system.jsonl"
    path.write_text(json.dumps(missing[0]) + "\n")
    assert read_system(path)["summary"]["missing"] == {"gpu": "no NVML"}
