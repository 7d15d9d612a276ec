"""System metrics: NVML answers (recorded) and real processes into `system.jsonl`, and their sums."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import wait_until
from recorded_nvml import RecordedNvml

from kubelab.backends.local.system_sampler import NvmlReader, PsutilReader, SystemSampler, open_gpu_reader
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.spec import ExperimentSpec
from kubelab.system_digest import summarize_file
from kubelab.system_metrics import IDLE_WINDOW, read_lines, summarize


def test_nvml_reader_reads_each_field_in_its_unit_and_leaves_out_what_a_gpu_lacks() -> None:
    reader = NvmlReader(RecordedNvml())
    h100, t4 = reader.read([0, 1])
    assert (h100.index, h100.util, h100.memory_mib, h100.power_w, h100.temperature_c) == (
        0,
        0.0,
        512.0,
        70.25,
        34.0,
    )
    assert t4.power_w is None and t4.util == 3.0  # power "Not Supported" on that board
    assert "power_w" not in t4.as_json()
    h100, _ = reader.read([0, 1])
    assert (h100.util, h100.memory_mib, h100.power_w) == (87.0, 10240.0, 250.5)


def test_answers_recorded_on_an_h200_read_busy_then_idle_in_their_units() -> None:
    reader = NvmlReader(RecordedNvml("nvml_h200_two_runs.json"))
    busy = [reader.read([0])[0] for _ in range(4)]  # two runs of fp16 matmuls shared the GPU
    idle = [reader.read([0])[0] for _ in range(3)]  # after both ended
    assert {sample.util for sample in busy} == {100.0} and {sample.util for sample in idle} == {0.0}
    assert all(sample.power_w is not None and 600 < sample.power_w < 700 for sample in busy)
    assert all(sample.power_w is not None and sample.power_w < 150 for sample in idle)
    assert busy[0].memory_mib == 2761359360 / 2**20 and busy[0].temperature_c == 58.0


def test_no_nvml_and_fake_gpus_each_say_why_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBELAB_FAKE_GPUS", raising=False)
    reader, why = open_gpu_reader(RecordedNvml(missing_library=True))
    assert reader is None and "NVML is not available" in why and "Not Found" in why
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "2")
    reader, why = open_gpu_reader(RecordedNvml())
    assert reader is None and "simulated" in why


def test_sampler_writes_sources_then_samples_and_the_summary_integrates_them(tmp_path: Path) -> None:
    path = tmp_path / "system.jsonl"
    clock = iter([100.0, 105.0, 110.0, 115.0]).__next__
    sampler = SystemSampler(path, [0, 1], 5.0, NvmlReader(RecordedNvml()), process_reader=None, clock=clock)
    with sampler:
        pass  # the thread's first tick is an interval away; sample by hand for exact times
    for _ in range(4):
        sample = sampler.sample()
        with open(path, "a") as handle:
            handle.write(json.dumps(sample.as_json()) + "\n")
    lines = list(read_lines(path))
    assert lines[0] == {"sources": {"gpu": "nvml"}, "missing": {}}
    assert lines[1]["gpus"][0] == {
        "index": 0,
        "util": 0.0,
        "memory_mib": 512.0,
        "power_w": 70.25,
        "temperature_c": 34.0,
    }
    assert "cpu_percent" not in lines[1]  # no process reader: nothing, not zero
    summary = summarize(lines)
    assert summary.samples == 4
    assert summary.gpu_hours == pytest.approx(2 * 15 / 3600)  # two GPUs for 15 s
    # Only the H100 reports power: trapezoids over 70.25 -> 250.5 -> 290 -> 310 W, 5 s each.
    joules = 5 * ((70.25 + 250.5) / 2 + (250.5 + 290) / 2 + (290 + 310) / 2)
    assert summary.energy_wh == pytest.approx(joules / 3600)
    utils = [0, 3, 87, 5, 91, 4, 95, 6]
    assert summary.gpu_util == pytest.approx(sum(utils) / len(utils))
    assert summary.gpu_util_p95 == 95.0
    assert summary.gpu_memory_peak_mib == 12288.0
    assert summary.notice is None


def test_a_torn_last_line_and_odd_values_are_skipped_not_zeroed(tmp_path: Path) -> None:
    path = tmp_path / "system.jsonl"
    path.write_text(
        '{"sources": {"process": "psutil"}, "missing": {"gpu": "no NVML"}}\n'
        '{"time": 1, "cpu_percent": 50, "rss_mib": 100}\n'
        '{"time": 2, "cpu_percent": "NaN", "rss_mib": true}\n'
        "not json\n"
        '{"time": 3, "cpu_percent": 150, "rss_mib": 300}\n'
        '{"time": 4, "cpu_per'
    )
    summary = summarize_file(path)
    assert summary.samples == 3
    assert summary.cpu_percent == 100.0 and summary.rss_peak_mib == 300.0
    assert summary.gpu_hours is None and summary.energy_wh is None and summary.gpu_util is None
    assert summary.missing == {"gpu": "no NVML"}
    assert summary.as_json() == {
        "samples": 3,
        "cpu_percent": 100.0,
        "rss_peak_mib": 300.0,
        "missing": {"gpu": "no NVML"},
    }


def _idle_lines(util: float, cpu: float, seconds: float) -> list[dict[str, Any]]:
    return [
        {"time": t, "gpus": [{"index": 0, "util": util}], "cpu_percent": cpu}
        for t in range(0, int(seconds) + 1, 5)
    ]


def test_a_gpu_idle_for_ten_minutes_gets_one_notice_naming_the_likely_cause() -> None:
    summary = summarize(_idle_lines(6, 100, IDLE_WINDOW + 60))
    assert summary.notice == "GPU 0 averaged 6% over 10 min while CPU was 100%: input-bound?"
    assert summarize(_idle_lines(6, 100, IDLE_WINDOW - 60)).notice is None  # not ten minutes yet
    assert summarize(_idle_lines(40, 100, IDLE_WINDOW * 2)).notice is None  # busy enough


BUSY_CHILD = textwrap.dedent(
    """
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "x = bytearray(64 * 2**20)\\nwhile True: pass"])
    sys.stdin.read()  # until the test closes stdin
    child.kill()
    """
)


def test_psutil_reader_sums_the_cpu_and_memory_of_a_process_tree() -> None:
    parent = subprocess.Popen([sys.executable, "-c", BUSY_CHILD], stdin=subprocess.PIPE)
    try:
        reader = PsutilReader(parent.pid)
        readings = []
        for _ in range(200):  # until the child has spun for a while (cpu_percent needs two reads)
            readings.append(reader.read())
            cpu, rss = readings[-1]
            if cpu is not None and cpu > 1 and rss is not None and rss > 64:
                break
            subprocess.run([sys.executable, "-c", "pass"], check=True)  # let time pass, no sleep
        cpu, rss = readings[-1]
        assert cpu is not None and cpu > 1, readings  # the spinning child (a shared machine: any share)
        assert rss is not None and rss > 64, readings  # the child's 64 MiB buffer is counted
    finally:
        assert parent.stdin is not None
        parent.stdin.close()
        parent.wait(timeout=10)


TRIAL = textwrap.dedent(
    """
    import json, os, time
    path = os.path.join(os.environ["KUBELAB_RUN_DIR"], "system.jsonl")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # work until the runner has sampled this process
        x = sum(i * i for i in range(20000))
        if os.path.exists(path) and any('"cpu_percent"' in line for line in open(path)):
            break
    """
)


def test_a_local_run_on_simulated_gpus_records_its_processes_and_says_why_no_gpu_metrics(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0.05")
    (lab_env / "trial.py").write_text(TRIAL)
    record = lab.submit({"command": ["python", str(lab_env / "trial.py")], "resources": {"gpus": 1}})
    final = wait_until(lab, record["id"])
    assert final["status"] == "Succeeded", final
    lines = list(read_lines(lab.runs_root / record["id"] / "system.jsonl"))
    assert lines[0]["missing"] == {"gpu": "the GPUs are simulated (KUBELAB_FAKE_GPUS): no GPU metrics"}
    assert lines[0]["sources"] == {"process": "psutil"}
    samples = lines[1:]
    assert samples and all("gpus" not in s for s in samples)  # never invented GPU numbers
    assert any(s.get("rss_mib", 0) > 1 for s in samples)
    metrics = lab.metrics(record["id"])
    assert all("cpu_percent" not in (point.get("metrics") or {}) for point in metrics)


def test_sampling_off_writes_nothing(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0")
    record = lab.submit({"command": ["python", "-c", "pass"]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert not (lab.runs_root / record["id"] / "system.jsonl").exists()


def test_a_runs_own_interval_wins_over_the_labs(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`system_metrics_interval: 0` turns one run's sampling off in a lab that samples; a run
    that asks for 1 s is sampled in a lab whose default is off."""
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0.05")
    quiet = lab.submit({"command": ["python", "-c", "pass"], "system_metrics_interval": 0})
    assert wait_until(lab, quiet["id"])["status"] == "Succeeded"
    assert not (lab.runs_root / quiet["id"] / "system.jsonl").exists()
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0")
    (lab_env / "trial.py").write_text(TRIAL)
    sampled = lab.submit({"command": ["python", str(lab_env / "trial.py")], "system_metrics_interval": 1})
    assert wait_until(lab, sampled["id"])["status"] == "Succeeded"
    lines = list(read_lines(lab.runs_root / sampled["id"] / "system.jsonl"))
    assert lines[0]["sources"] == {"process": "psutil"} and any("rss_mib" in s for s in lines[1:]), lines


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (-1, "must be at least 0, not -1"),
        (7200, "must be at most 3600, not 7200"),
        ("often", "must be a whole number, not 'often'"),
    ],
)
def test_a_bad_interval_is_refused_by_name(value: object, reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        ExperimentSpec.parse({"command": "true", "system_metrics_interval": value})
    assert [(e.path, e.reason) for e in caught.value.fields] == [("system_metrics_interval", reason)]


def test_kubelab_show_prints_the_runs_use_of_the_machine(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0")
    record = lab.submit({"command": ["python", "-c", "pass"]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    run_dir = lab.runs_root / record["id"]
    (run_dir / "system.jsonl").write_text(
        '{"sources": {"gpu": "nvml", "process": "psutil"}, "missing": {}}\n'
        + "".join(
            json.dumps({"time": t, "gpus": [{"index": 0, "util": 80, "power_w": 200}], "cpu_percent": 95})
            + "\n"
            for t in (0, 1800, 3600)
        )
    )
    shown = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "show", record["id"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    section = shown[shown.index("System") :]  # kubelab show's layout: a System section
    assert "GPU 80% mean (p95 80%), 1 GPU-hours, 200 Wh, CPU 95%" in section.splitlines()[1]


def test_the_file_is_folded_incrementally_and_agrees_with_a_full_read(tmp_path: Path) -> None:
    path = tmp_path / "system.jsonl"
    lines = [
        {"time": t, "gpus": [{"index": 0, "util": t % 100, "power_w": 100 + t}]} for t in range(0, 600, 5)
    ]
    with open(path, "w") as handle:
        for line in lines[:60]:
            handle.write(json.dumps(line) + "\n")
    first = summarize_file(path)
    assert first.samples == 60
    with open(path, "a") as handle:
        for line in lines[60:]:
            handle.write(json.dumps(line) + "\n")
        handle.write('{"time": 9999, "gp')  # torn: waits for its end
    assert summarize_file(path) == summarize(lines)
    path.write_text(json.dumps(lines[0]) + "\n")  # replaced by a shorter file: read again
    assert summarize_file(path).samples == 1


def test_the_record_carries_system_sums_priority_and_restarts_and_pql_queries_them(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0")
    idle = lab.submit({"command": ["python", "-c", "pass"], "name": "idle", "priority": "low"})
    busy = lab.submit({"command": ["python", "-c", "pass"], "name": "busy"})
    for record, util in ((idle, 6), (busy, 90)):
        assert wait_until(lab, record["id"])["status"] == "Succeeded"
        samples = [{"time": t, "gpus": [{"index": 0, "util": util, "power_w": 200}]} for t in (0, 1800, 3600)]
        (lab.runs_root / record["id"] / "system.jsonl").write_text(
            "".join(json.dumps(s) + "\n" for s in samples)
        )
    shown = lab.get(idle["id"])
    assert shown["system"]["gpu_util"] == 6.0 and shown["system"]["energy_wh"] == 200.0
    assert shown["system"]["gpu_hours"] == 1.0 and shown["system"]["cpu_percent"] is None
    assert shown["priority"] == 100 and shown["restarts"] == 0
    found, _ = lab.list("system.gpu_util:<20")
    assert [r["name"] for r in found] == ["idle"]
    found, _ = lab.list("system.energy_wh:>100, priority:>=1000")
    assert [r["name"] for r in found] == ["busy"]


def test_usage_sums_gpu_hours_energy_and_weighted_utilisation_per_key(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubelab.usage import usage

    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "0")
    runs = []
    for name, util, hours, gpu_type in (("a", 80, 2, "A100"), ("b", 20, 1, "A100"), ("c", None, 0, "T4")):
        record = lab.submit({"command": ["python", "-c", "pass"], "name": name})
        assert wait_until(lab, record["id"])["status"] == "Succeeded"
        if util is not None:
            samples = [
                {"time": t, "gpus": [{"index": 0, "util": util, "power_w": 100}]} for t in (0, hours * 3600)
            ]
            path = lab.runs_root / record["id"] / "system.jsonl"
            path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        spec = lab.runs_root / record["id"] / "spec.json"
        data = json.loads(spec.read_text())
        data["resources"]["gpu_type"] = gpu_type
        spec.write_text(json.dumps(data))
        runs.append(record["id"])
    records, _ = lab.list()
    [mine] = usage(records, "user")
    assert (mine.runs, mine.gpu_hours, mine.energy_wh) == (3, 3.0, 300.0)
    assert mine.gpu_util == pytest.approx((80 * 2 + 20 * 1) / 3)  # weighted by GPU-hours
    by_type = {u.key: u for u in usage(records, "type")}
    assert by_type["T4"].runs == 1 and by_type["T4"].gpu_util is None  # nothing measured: not 0%
    assert usage(records, "user", since=4_000_000_000.0) == []
    shown = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "usage", "--by", "type", "--since", "7d"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.splitlines()[0].split() == [
        "TYPE",
        "RUNS",
        "GPU-HOURS",
        "ENERGY",
        "(WH)",
        "MEAN",
        "GPU",
        "UTIL",
    ]
    assert "A100  2     3.00       300.0        60%" in shown
    refused = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "usage", "--since", "soon"], capture_output=True, text=True
    )
    assert refused.returncode != 0 and "since" in refused.stderr
