"""Benchmark: a 20-trial TPE sweep at concurrency 2 on the local backend, against its floor.

The floor is the same 20 trial processes started directly, two at a time, with nothing
around them. The sweep adds the driver (tuner, ledger, polling) and the runners that
start, watch and record each trial. It is measured as a server runs it: the server keeps
a warm driver and warm runners (`kubelab.warm`), so the timer starts at `create` on an
idle server, and again with nothing warm (a CLI on a quiet machine: `cold_s`). Printed as
JSON lines, medians over `--repeats` runs:

- `sweep_vs_floor` for a trivial trial (`work_s` 0: fixed costs dominate) and for a trial
  doing `--work` seconds of "training" (a sleep), with `ratio` = sweep / floor (target 1.5)
  and `cold_ratio` for the sweep started with nothing warm;
- `tuner_suggest_at_1000`: TPE `ask()` time on a study with 1,000 finished trials;
- `nni_local`: NNI 3.0's local mode on the same trial, space, TPE and concurrency (the
  `--work` one), run from its own virtualenv (`peer_venv.py`, pinned in `peers/nni.txt`,
  made once), with `ratio` = kubelab's sweep / NNI's.

Run: `python benchmarks/bench_sweep.py [--repeats 3] [--work 0.5] [--no-peers]`. Needs no server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TRIALS, CONCURRENCY = 20, 2
SPACE = {
    "lr": {"_type": "loguniform", "_value": [1e-4, 1e-1]},
    "units": {"_type": "choice", "_value": [16, 32, 64]},
}
TRIAL = """\
import math, sys, time
import nni
params = nni.get_next_parameter()
time.sleep(float(sys.argv[1]))
nni.report_final_result(abs(math.log10(params["lr"]) + 2) + params["units"] / 640)
"""


def floor(folder: Path, work: float) -> float:
    """20 bare `python trial.py` runs, two at a time, each with parameters in its environment."""
    from kubelab.shims import SHIMS

    def one(index: int) -> None:
        run = folder / f"floor-{index}"
        run.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "PYTHONPATH": str(SHIMS),
            "KUBELAB_RUN_DIR": str(run),
            "KUBELAB_NNI_PARAMS": json.dumps({"lr": 0.01, "units": 32}),
        }
        subprocess.run([sys.executable, "trial.py", str(work)], cwd=folder, env=env, check=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(TRIALS)))
    return time.perf_counter() - start


def sweep(folder: Path, work: float, warm: bool) -> float:
    """Create the sweep and wait until its driver records the end.

    `warm`: first do what a server does at start (`SweepWatcher.start`) and wait until the
    warm driver and runners are idle, as they are on a server nobody is using.
    """
    from kubelab.experiments import Experiments
    from kubelab.sweeps.service import Sweeps
    from kubelab.sweeps.watcher import SweepWatcher
    from kubelab.warm import DRIVER, RUNNER, WarmPool

    home = folder / ("home-warm" if warm else "home-cold")
    lab = Experiments(home)
    sweeps = Sweeps(lab)
    if warm:
        SweepWatcher(lab).start()
        deadline = time.monotonic() + 30
        while not (WarmPool(home, DRIVER).idle() and len(WarmPool(home, RUNNER).idle()) >= RUNNER.size()):
            if time.monotonic() > deadline:
                raise SystemExit("the warm driver and runners did not start within 30 s")
            time.sleep(0.01)
    spec = {
        "space": SPACE,
        "tuner": "tpe",
        "max_trials": TRIALS,
        "concurrency": CONCURRENCY,
        "parameter_style": "env",
        "trial": {"command": ["python", "trial.py", str(work)]},
    }
    start = time.perf_counter()
    record = sweeps.create(spec, base_dir=folder)
    target = sweeps.sweep(record["id"])
    stamp = None
    while True:  # a stat every 2 ms; the state is read only when it changed
        if target.state_mtime() != stamp:
            stamp = target.state_mtime()
            if target.read_state().status != "Running":
                break
        time.sleep(0.002)
    elapsed = time.perf_counter() - start
    final = sweeps.record(target)
    if final["status"] != "Succeeded" or final["counts"]["succeeded"] != TRIALS:
        raise SystemExit(f"benchmark sweep did not succeed: {final}")
    return elapsed


def compare(work: float, repeats: int) -> dict[str, Any]:
    floors, sweeps, colds = [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "trial.py").write_text(TRIAL)
            os.environ["KUBELAB_MACHINE_DIR"] = str(folder / "machine")
            floors.append(floor(folder, work))
            sweeps.append(sweep(folder, work, warm=True))
            colds.append(sweep(folder, work, warm=False))
            for home in folder.glob("home-*"):
                shutil.rmtree(home / "warm", ignore_errors=True)  # idle helpers see it and exit
    floor_s, sweep_s, cold_s = (statistics.median(x) for x in (floors, sweeps, colds))
    return {
        "bench": "sweep_vs_floor",
        "trials": TRIALS,
        "concurrency": CONCURRENCY,
        "tuner": "tpe",
        "work_s": work,
        "repeats": repeats,
        "floor_s": round(floor_s, 3),
        "sweep_s": round(sweep_s, 3),
        "overhead_per_trial_s": round((sweep_s - floor_s) / TRIALS * CONCURRENCY, 3),
        "ratio": round(sweep_s / floor_s, 2),
        "target_ratio": 1.5,
        "cold_s": round(cold_s, 3),
        "cold_ratio": round(cold_s / floor_s, 2),
    }


def suggestion_time(finished: int = 1000, asks: int = 20) -> dict[str, Any]:
    """TPE ask() on a study (journal storage, as sweeps use) holding `finished` completed trials."""
    import math
    import random

    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.trial import create_trial

    from kubelab.sweeps.space import SearchSpace
    from kubelab.sweeps.store import SweepDirectory
    from kubelab.sweeps.tuners import Tuner

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        storage = SweepDirectory(Path(tmp)).storage()
        tuner = Tuner(SearchSpace.parse(SPACE), "tpe", storage=storage, study_name="bench")
        dists = {
            "lr": FloatDistribution(1e-4, 1e-1, log=True),
            "units": CategoricalDistribution([16, 32, 64]),
        }
        rng = random.Random(0)
        trials = []
        for _ in range(finished):
            params = {"lr": 10 ** rng.uniform(-4, -1), "units": rng.choice([16, 32, 64])}
            value = abs(math.log10(params["lr"]) + 2) + params["units"] / 640
            trials.append(
                create_trial(
                    params=params, distributions=dists, value=value, user_attrs={"kubelab_params": params}
                )
            )
        tuner.study.add_trials(trials)
        times = []
        for _ in range(asks):
            start = time.perf_counter()
            suggestion = tuner.ask()
            times.append(time.perf_counter() - start)
            tuner.tell(suggestion.number, 1.0)
    return {
        "bench": "tuner_suggest_at_1000",
        "tuner": "tpe",
        "finished_trials": finished,
        "asks": asks,
        "median_ms": round(statistics.median(times) * 1000, 1),
        "max_ms": round(max(times) * 1000, 1),
    }


def nni_local(work: float, kubelab_s: float) -> dict[str, Any]:
    """NNI 3.0's local mode on the same trial, space, tuner and concurrency, in its own venv."""
    from peer_venv import peer_python

    job = {"trial": TRIAL, "args": [str(work)], "space": SPACE, "trials": TRIALS}
    job.update(concurrency=CONCURRENCY, tuner="TPE")
    done = subprocess.run(
        [str(peer_python("nni")), str(Path(__file__).with_name("nni_peer.py"))],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    result = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    return {
        "bench": "nni_local",
        "trials": TRIALS,
        "concurrency": CONCURRENCY,
        "work_s": work,
        "nni_s": round(result["seconds"], 3),
        "nni_finished": result["finished"],
        "kubelab_s": kubelab_s,
        "ratio": round(kubelab_s / result["seconds"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--work", type=float, default=0.5, help="seconds each trial 'trains' in the second comparison"
    )
    parser.add_argument("--no-peers", action="store_true", help="skip NNI (its venv is made once)")
    args = parser.parse_args()
    os.environ.setdefault("KUBELAB_STOP_GRACE", "2")
    for work in (0.0, args.work):
        result = compare(work, args.repeats)
        print(json.dumps(result), flush=True)
    print(json.dumps(suggestion_time()), flush=True)
    if args.no_peers:
        print(json.dumps({"bench": "nni_local", "skipped": "--no-peers"}), flush=True)
    else:
        print(json.dumps(nni_local(args.work, result["sweep_s"])), flush=True)


if __name__ == "__main__":
    main()
