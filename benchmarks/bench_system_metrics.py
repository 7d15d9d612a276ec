"""System metrics: what sampling costs a run, and how fast a day of samples is read.

Two JSON lines, each against a baseline measured in the same run:

- `system_sampling`: the CPU the sampler's thread spends per sample (psutil over a real
  process tree: a parent and a spinning child) against the same thread waking on the same
  interval without sampling, and that cost as a fraction of one core at the default 5 s
  interval (target: at most 1%).
- `system_read_day`: `summarize_file` on 24 h of 5 s samples (17,280 lines, one GPU), read
  cold (a process that never read it) with the digest the runner saved a minute before the
  end, against the same read with no digest (every line decoded, as before digests) and the
  floor of decoding the file with `json.loads` line by line; the target is 50 ms.
- `system_read_view`: what the experiment view asks for, `read_system` (the sums and 500
  points per series) on the same day of samples: cold (a server that never read the file,
  with the runner's digest) and live (the view's re-read of a running run: a sample appended
  since the last read), against the cold read with no digest and the same floor; the target
  is 50 ms. Beside it, what the runner's minute costs (12 samples folded, the digest saved),
  as a fraction of one core.

Run: `python benchmarks/bench_system_metrics.py [--samples 200] [--lines 17280]`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kubelab import system_digest, system_metrics, system_series
from kubelab.backends.local.system_sampler import PsutilReader, SystemSampler
from kubelab.system_digest import digest_path, summarize_file
from kubelab.system_metrics import DEFAULT_INTERVAL

SPIN = (  # a parent and a spinning child; the parent ends the child when its stdin closes
    "import subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
    "sys.stdin.read()\n"
    "child.kill()\n"
)


def sampling_cost(samples: int) -> dict[str, float]:
    """Per-sample CPU seconds of the sampler thread, against the same loop without sampling."""
    parent = subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.PIPE, start_new_session=True)
    try:
        with tempfile.TemporaryDirectory() as folder:
            sampler = SystemSampler(
                Path(folder) / "system.jsonl", [], 0.0, process_reader=PsutilReader(parent.pid)
            )
            results: dict[str, float] = {}

            def sampled() -> None:
                start = time.thread_time()
                for _ in range(samples):
                    system_metrics.append(sampler.path, sampler.sample().as_json())
                results["sampled"] = time.thread_time() - start

            def idle() -> None:
                start = time.thread_time()
                event = threading.Event()
                for _ in range(samples):
                    event.wait(0)
                results["idle"] = time.thread_time() - start

            for work in (sampled, idle):
                thread = threading.Thread(target=work)
                thread.start()
                thread.join()
    finally:
        assert parent.stdin is not None
        parent.stdin.close()  # the parent kills its child, then exits
        try:
            parent.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(parent.pid, signal.SIGKILL)  # its own session: the child goes too
            parent.wait()
    per_sample = max(results["sampled"] - results["idle"], 0.0) / samples
    return {"per_sample_ms": per_sample * 1000, "idle_ms": results["idle"] / samples * 1000}


def day_file(folder: Path, lines: int) -> Path:
    """A day of samples, with the digest the runner saved a minute (12 samples) before the end."""
    path = folder / "system.jsonl"
    with open(path, "w") as handle:
        handle.write(json.dumps({"sources": {"gpu": "nvml", "process": "psutil"}, "missing": {}}) + "\n")
        for i in range(lines):
            if i == max(lines - 12, 0):
                handle.flush()
                system_digest.read(path, save_after=1)
                forget_kept()
            gpu = {
                "index": 0,
                "util": 40.0 + i % 50,
                "memory_mib": 10240.0,
                "power_w": 250.5,
                "temperature_c": 61.0,
            }
            sample = {"time": 1.7e9 + 5 * i, "gpus": [gpu], "cpu_percent": 97.5, "rss_mib": 812.0}
            handle.write(json.dumps(sample, separators=(",", ":")) + "\n")
    return path


def forget_kept() -> None:
    """As a process that never read the file (it may still find the digest beside it)."""
    system_digest._KEPT.clear()
    system_digest._SUMS.clear()


def without_digest(path: Path, read: Callable[[Path], object]) -> Callable[[], None]:
    """`read` as before digests: a copy of the file with no digest, nothing kept, every line decoded."""
    alone = path.parent / "undigested"
    alone.mkdir(exist_ok=True)
    copy = alone / path.name
    copy.write_bytes(path.read_bytes())

    def run() -> None:
        digest_path(copy).unlink(missing_ok=True)
        forget_kept()
        read(copy)

    return run


def median_ms(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def read_day(lines: int, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        path = day_file(Path(folder), lines)

        def cold() -> None:
            forget_kept()
            summarize_file(path)

        def floor() -> None:
            with open(path, "rb") as handle:
                for raw in handle:
                    json.loads(raw)

        result = {"summarize_ms": median_ms(cold, repeats), "floor_ms": median_ms(floor, repeats)}
        undigested = without_digest(path, summarize_file)
        result["undigested_ms"] = median_ms(undigested, repeats)
        return result


def read_view(lines: int, repeats: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        path = day_file(Path(folder), lines)
        sample = json.dumps({"time": 2e9, "gpus": [{"index": 0, "util": 50.0}]}) + "\n"

        def cold() -> None:
            forget_kept()  # as a server that never read this run
            system_series.read_system(path)

        def live() -> None:
            with open(path, "a") as handle:  # the runner's next sample
                handle.write(sample)
            system_series.read_system(path)

        def floor() -> None:
            with open(path, "rb") as handle:
                for raw in handle:
                    json.loads(raw)

        result = {"cold_ms": median_ms(cold, repeats), "floor_ms": median_ms(floor, repeats)}
        result["undigested_ms"] = median_ms(without_digest(path, system_series.read_system), repeats)
        result["live_ms"] = median_ms(live, repeats)

        def runner_save() -> None:  # the sampler's minute: 12 samples folded, the digest saved
            with open(path, "a") as handle:
                handle.write(sample * 12)
            system_digest.read(path, save_after=1)

        result["save_ms"] = median_ms(runner_save, repeats)
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--lines", type=int, default=17_280)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    cost = sampling_cost(args.samples)
    fraction = cost["per_sample_ms"] / 1000 / DEFAULT_INTERVAL
    print(
        json.dumps(
            {
                "bench": "system_sampling",
                "samples": args.samples,
                "per_sample_ms": round(cost["per_sample_ms"], 3),
                "baseline_idle_ms": round(cost["idle_ms"], 4),
                "ratio_core_fraction_at_5s": round(fraction, 5),
            }
        )
    )
    read = read_day(args.lines, args.repeats)
    print(
        json.dumps(
            {
                "bench": "system_read_day",
                "lines": args.lines,
                "median_ms": round(read["summarize_ms"], 2),
                "undigested_median_ms": round(read["undigested_ms"], 2),
                "baseline_median_ms": round(read["floor_ms"], 2),
                "ratio": round(read["summarize_ms"] / read["floor_ms"], 4),
                "ratio_to_undigested": round(read["summarize_ms"] / read["undigested_ms"], 4),
            }
        )
    )
    view = read_view(args.lines, args.repeats)
    print(
        json.dumps(
            {
                "bench": "system_read_view",
                "lines": args.lines,
                "cold_median_ms": round(view["cold_ms"], 2),
                "live_median_ms": round(view["live_ms"], 2),
                "undigested_cold_median_ms": round(view["undigested_ms"], 2),
                "baseline_median_ms": round(view["floor_ms"], 2),
                "ratio_cold": round(view["cold_ms"] / view["floor_ms"], 4),
                "ratio_live": round(view["live_ms"] / view["floor_ms"], 4),
                "ratio_cold_to_undigested": round(view["cold_ms"] / view["undigested_ms"], 4),
                "runner_digest_save_ms": round(view["save_ms"], 3),
                "ratio_save_core_fraction_per_minute": round(view["save_ms"] / 60_000, 6),
            }
        )
    )


if __name__ == "__main__":
    main()
