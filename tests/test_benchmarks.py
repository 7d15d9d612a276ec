"""Every benchmark still runs: each, at its smallest size, exits 0 and prints JSON lines that
hold a ratio against a baseline measured in the same run. Timings are not asserted (tests
never judge wall-clock time); `benchmarks/run` at full size is for that."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SMALLEST = [
    pytest.param("bench_query.py", [], id="query"),
    pytest.param("bench_tuner.py", ["--history", "20", "--asks", "2"], id="tuner"),
    pytest.param("bench_core.py", [], id="core"),
    pytest.param(
        "bench_system_metrics.py", ["--samples", "5", "--lines", "100", "--repeats", "1"], id="system"
    ),
    pytest.param("bench_notebook.py", ["--runs", "1"], id="notebook"),
    pytest.param(
        "bench_sweep.py",
        ["--repeats", "1", "--overhead-trials", "30", "--phases", "1", "--no-peers"],
        id="sweep",
    ),
    pytest.param("bench_env.py", ["--runs", "1", "--builds", "1"], id="env"),
    pytest.param("bench_goodput.py", ["--steps", "40", "--preemptions", "1", "--after", "0.5"], id="goodput"),
    pytest.param("bench_serving.py", ["--requests", "20", "--clients", "2", "--seconds", "1"], id="serving"),
    pytest.param("bench_views.py", ["--runs", "60", "--baseline", "20", "--repeats", "1"], id="views"),
    pytest.param("bench_kube.py", ["--live", "5", "--samples", "5"], id="kube", marks=pytest.mark.cluster),
    pytest.param(
        "bench_spawner.py", ["--rounds", "1", "--users", "2"], id="spawner", marks=pytest.mark.cluster
    ),
]


def test_every_benchmark_is_checked_here() -> None:
    checked = {param.values[0] for param in SMALLEST}
    assert checked == {path.name for path in BENCHMARKS.glob("bench_*.py")}


@pytest.mark.parametrize(("script", "args"), SMALLEST)
def test_the_benchmark_runs_and_reports_ratios(script: str, args: list[str], tmp_path: Path) -> None:
    # as a user runs them: without the suite's own settings (no warm drivers, short idles)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBELAB_API_", "KUBELAB_WARM_"))}
    env["KUBELAB_MACHINE_DIR"] = str(tmp_path / "machine")
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout[-2000:]
    assert all(isinstance(line, dict) and line.get("bench") for line in lines), lines  # one vocabulary
    assert any(key.startswith("ratio") for line in lines for key in line), lines
