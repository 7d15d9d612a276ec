"""Core benchmarks (issue: foundation). Prints one JSON line per measurement.

- import: `import kubelab` over a bare interpreter (target: at most 30 ms more).
- submit_to_running: REST POST → the trial process running, through a real Jupyter
  server (target: median at most 150 ms); baseline: Popen of the same trial.
- list_10k: listing 10,000 records with a PQL filter (target: at most 100 ms), as the
  CLI does it (a fresh process state, cache on disk) and as the server does it (warm);
  baseline: reading every status.json, which is what an index spares.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def emit(name: str, samples: list[float], baseline: list[float] | None = None, **extra: Any) -> None:
    median = statistics.median(samples) * 1000
    line = {"bench": name, "median_ms": round(median, 2), "n": len(samples)}
    if baseline is not None:
        base = statistics.median(baseline) * 1000
        line.update(baseline_median_ms=round(base, 2), ratio=round(median / base, 2) if base else None)
    line.update(extra)
    print(json.dumps(line), flush=True)


def timed_run(argv: list[str], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, check=True)
        samples.append(time.perf_counter() - start)
    return samples


def bench_import(repeat: int = 30) -> None:
    bare = timed_run([sys.executable, "-c", "pass"], repeat)
    with_kubelab = timed_run([sys.executable, "-c", "import kubelab"], repeat)
    overhead = (statistics.median(with_kubelab) - statistics.median(bare)) * 1000
    emit("import_kubelab", with_kubelab, bare, overhead_ms=round(overhead, 2), target_overhead_ms=30)


TRIAL = "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"


def wait_for_file(path: Path, timeout: float = 30) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
            if text:
                return float(text)
        except FileNotFoundError:
            pass
        time.sleep(0.001)
    raise TimeoutError(path)


def bench_submit(repeat: int = 20) -> None:
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-") as tmp:  # idle helpers exit with it
        _bench_submit(Path(tmp), repeat)


def _bench_submit(base: Path, repeat: int) -> None:
    from jupyter_server_process import JupyterServer

    env = {"KUBELAB_MACHINE_DIR": str(base / "machine")}
    baseline = []
    for i in range(repeat):
        marker = base / f"bare-{i}"
        start = time.time()
        process = subprocess.Popen([sys.executable, "-c", TRIAL, str(marker)])
        baseline.append(wait_for_file(marker) - start)
        process.wait()
    samples = []
    with JupyterServer(base / "root", base / "home", env=env) as server:
        server.post("experiments", {"command": ["python", "-c", "pass"]})  # warm up
        for i in range(repeat):
            marker = base / f"trial-{i}"
            start = time.time()
            response = server.post("experiments", {"command": ["python", "-c", TRIAL, str(marker)]})
            response.raise_for_status()
            samples.append(wait_for_file(marker) - start)
    emit("submit_to_running_rest", samples, baseline, target_median_ms=150)


def make_records(home: Path, count: int) -> None:
    from kubelab.records import FAILED, SUCCEEDED, RunDirectory, Status

    runs = home / "runs"
    for i in range(count):
        status = Status()
        status.move("Running", "running")
        status.move(SUCCEEDED if i % 3 else FAILED, "done", 0)
        run = RunDirectory.create(
            runs,
            {"name": f"exp-{i}", "command": ["true"], "params": {"lr": i / count}, "tags": ["bench"]},
            status,
        )
        run.metrics_file.write_text(json.dumps({"step": 1, "metrics": {"loss": (i % 100) / 100}}) + "\n")


def bench_list(count: int = 10_000, repeat: int = 15) -> None:
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-list-") as tmp:
        _bench_list(Path(tmp), count, repeat)


def _bench_list(home: Path, count: int, repeat: int) -> None:
    from kubelab.experiments import Experiments
    from kubelab.records import RunDirectory

    make_records(home, count)
    query = "status:succeeded, metrics.loss:<0.5, tags:bench"
    Experiments(home).list(query)  # builds the cache once, as the first `kubelab ls` would

    def cold() -> tuple[float, int]:
        start = time.perf_counter()
        items, total = Experiments(home).list(query, limit=50)
        return time.perf_counter() - start, total

    cold_samples = [cold()[0] for _ in range(repeat)]
    warm_lab = Experiments(home)
    warm_lab.list(query)
    warm = []
    for _ in range(repeat):
        start = time.perf_counter()
        _, total = warm_lab.list(query, limit=50)
        warm.append(time.perf_counter() - start)
    baseline = []
    for _ in range(3):
        start = time.perf_counter()
        for name in os.listdir(home / "runs"):
            RunDirectory(home / "runs" / name).status()
        baseline.append(time.perf_counter() - start)
    emit("list_10k_filtered_cli", cold_samples, baseline, matches=total, target_median_ms=100)
    emit("list_10k_filtered_server", warm, baseline, matches=total, target_median_ms=100)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-machine-") as machine:
        os.environ.setdefault("KUBELAB_MACHINE_DIR", machine)
        bench_import()
        bench_list()
        bench_submit()
