"""Where a running sweep's CPU goes, per trial: a profile for `docs/benchmarks.md`, not a benchmark.

Runs one sweep driver in this process (the sweep recorded as `Sweeps.create` records it, the
driver's launch left out) over two warm runners it started, on `bench_sweep.py`'s trivial trial,
and prints one JSON line: the driver's CPU per trial and its parts (TPE ask, tell, the submit,
the looks at running trials, the ledger writes, the journal's fsync), the runners' own CPU and
the trials' CPU (the runners' reaped children), all from `time.process_time` and /proc, how
many cold runners the sweep had to start beside the warm ones, and two latencies from the
runs' status files (a trial's end to the next submit; a submit to its trial's start).
`--profile` adds cProfile's top functions of the driver (its wall time, on stderr).

Run: `python benchmarks/sweep_cpu.py [--trials 200] [--profile]`.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_sweep import TRIAL, spec


def timed(owner: Any, name: str, label: str, spent: dict[str, float]) -> None:
    """Wrap `owner.name` so that its CPU time adds up under `label`."""
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.process_time() - start

    setattr(owner, name, wrapper)


def ticks(pid: int) -> list[int]:
    """utime, stime, children's utime and stime of `pid`, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return [int(x) for x in fields[11:15]]


def latencies(runs: Path) -> dict[str, float]:
    """Medians over the trials, from their status files: a trial's end to the next submit (the
    driver: end detection, tell, ask, the submit's files) and a submit to its trial's start (the
    hand-over to a warm runner and its start of the process)."""
    from kubelab.records import RunDirectory, parse_iso

    statuses = [RunDirectory(path).status() for path in runs.iterdir() if path.is_dir()]
    ends = sorted(parse_iso(s.finished_at) for s in statuses if s.finished_at)
    gaps, starts = [], []
    for status in statuses:
        created = parse_iso(status.created_at)
        before = [end for end in ends if end <= created]
        if before:
            gaps.append(created - before[-1])
        if status.started_at:
            starts.append(parse_iso(status.started_at) - created)
    median = statistics.median
    return {
        "end_to_submit_ms": round(median(gaps) * 1000, 2),
        "submit_to_start_ms": round(median(starts) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="cProfile the driver (stderr)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kubelab-sweep-cpu-"))
    home, root = base / "home", base / "root"
    root.mkdir()
    (root / "trial.py").write_text(TRIAL)
    os.environ.update(KUBELAB_HOME=str(home), KUBELAB_MACHINE_DIR=str(base / "machine"))
    os.chdir(root)
    from kubelab.experiments import Experiments
    from kubelab.sweeps import driver, service
    from kubelab.sweeps.store import SweepDirectory
    from kubelab.sweeps.tuners import Tuner
    from kubelab.warm import RUNNER, WarmPool

    spent: dict[str, float] = {}
    for owner, name, label in [
        (Tuner, "ask", "ask_ms"),
        (Tuner, "tell", "tell_ms"),
        (Experiments, "submit", "submit_ms"),
        (driver.Driver, "check", "looks_ms"),
        (driver.Driver, "sync_study", "fsync_ms"),
        (SweepDirectory, "write_state", "ledger_ms"),
    ]:
        timed(owner, name, label, spent)
    driver.preload()
    lab = Experiments(home)
    pool = WarmPool(home, RUNNER)
    pool.top_up()
    deadline = time.monotonic() + 60
    while len(pool.idle()) < RUNNER.size() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # their TensorBoard import, beside the idle helper, ends too
    runners = pool.idle()
    before = {pid: ticks(pid) for pid in runners}
    setattr(driver, "launch", lambda sweep: 0)  # noqa: B010  (the driver runs here instead)
    record = service.Sweeps(lab).create(spec(args.trials, 0.0), base_dir=root)
    sweep = service.Sweeps(lab).sweep(record["id"])
    profile = cProfile.Profile() if args.profile else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profile:
        profile.enable()
    driver.Driver(sweep).main()
    if profile:
        profile.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = {pid: ticks(pid) for pid in runners if Path(f"/proc/{pid}").exists()}
    own = sum(a[0] + a[1] - b[0] - b[1] for pid, a in after.items() for b in [before[pid]])
    children = sum(a[2] + a[3] - b[2] - b[3] for pid, a in after.items() for b in [before[pid]])
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    per = 1000 / args.trials
    line = {"bench": "sweep_cpu_per_trial", "trials": args.trials, "wall_s": round(wall, 2)}
    line |= {"driver_ms": round(cpu * per, 2)} | {k: round(v * per, 2) for k, v in sorted(spent.items())}
    line |= {"runners_ms": round(own * tick_ms / args.trials, 2)}
    line |= {"trials_ms": round(children * tick_ms / args.trials, 2)}
    line |= {"cold_runners": len([pid for pid in pool.idle() if pid not in runners])}
    line |= latencies(home / "runs")
    line |= {"load_1m": round(os.getloadavg()[0], 2)}
    print(json.dumps(line), flush=True)
    if profile:
        pstats.Stats(profile, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    shutil.rmtree(base, ignore_errors=True)  # the idle runners see their pool gone and exit


if __name__ == "__main__":
    main()
