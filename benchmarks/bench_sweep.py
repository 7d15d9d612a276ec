"""Benchmark: a 20-trial TPE sweep at concurrency 2 on the local backend, against its floor.

The floor is the same 20 trial processes started directly, two at a time, with nothing
around them, each in a session of its own as kubelab's runner starts them. Measured pairwise
in each repeat (the machine's load moves both alike), with and without scikit-learn installed
in kubelab's environment, and printed as JSON lines (medians over `--repeats`; each ratio is
the median of the repeats' own ratios):

- `sweep_cold_cli`: `kubelab sweep -f config.yml --wait -o json` in a fresh home, nothing
  warm: the CLI starts the driver, the driver its runners (target: 2x the floor);
- `sweep_warm_rest`: the same sweep POSTed to a running Jupyter server's REST API, which
  keeps a warm driver and warm runners; timed from the POST until the sweep's state file
  says it ended (target: 1.3x the floor);
- `sweep_per_trial`: what each trial costs once the sweep runs (ask/tell, hand-over, end
  detection): the warm sweep and the floor at `--overhead-trials` (200) and at 20 trials,
  `((sweep_200 - floor_200) - (sweep_20 - floor_20)) / 180 * concurrency` (target 10 ms),
  beside `fsync_ms`, one append and fsync on this disk (the driver makes one per trial);
- `nni_local`: NNI 3.0's local mode on the same trial, space, TPE and concurrency, from its
  own virtualenv (`peer_venv.py`, pinned in `peers/nni.txt`, made once; `--no-peers` skips it);
- `tuner_suggest_at_1000`: TPE `ask()` on a study with 1,000 finished trials.

"With scikit-learn" puts `peers/sklearn.txt` (installed once into an overlay folder,
`peer_venv.overlay`) on PYTHONPATH for everything of that environment: the CLI, the server,
the drivers and runners they start, the trials, and the floor's trials alike.

- `sweep_cold_phases` and `sweep_driver_start` (`--phases`, default 3 cold sweeps): the cold
  path phase by phase from the files' timestamps, and a cold driver's start part by part
  (`sweep_phases.py`).

Run: `python benchmarks/bench_sweep.py [--repeats 3] [--overhead-trials 200] [--phases 3] [--no-peers]`.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

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


def spec(trials: int, work: float) -> dict[str, Any]:
    return {
        "space": SPACE,
        "tuner": "tpe",
        "max_trials": trials,
        "concurrency": CONCURRENCY,
        "parameter_style": "env",
        "trial": {"command": ["python", "trial.py", str(work)]},
    }


def floor(folder: Path, env: dict[str, str], trials: int, work: float) -> float:
    """`trials` bare `python trial.py` runs, two at a time, each with parameters in its environment."""
    from kubelab.shims import SHIMS

    def one(index: int) -> None:
        run = folder / f"floor-{index % CONCURRENCY}"
        run.mkdir(exist_ok=True)
        paths = [str(SHIMS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        trial_env = {
            **env,
            "PYTHONPATH": os.pathsep.join(paths),
            "KUBELAB_RUN_DIR": str(run),
            "KUBELAB_NNI_PARAMS": json.dumps({"lr": 0.01, "units": 32}),
        }
        # A session of its own, as the runner starts a trial: with the kernel's autogroup
        # scheduling each session gets its own share of the CPUs, so on a busy machine trials
        # left in the benchmark's session would run slower than kubelab's.
        command = [sys.executable, "trial.py", str(work)]
        subprocess.run(command, cwd=folder, env=trial_env, check=True, start_new_session=True)

    start = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(one, range(trials)))
    return time.perf_counter() - start


def kubelab_command() -> list[str]:
    script = Path(sys.executable).with_name("kubelab")
    return [str(script)] if script.exists() else [sys.executable, "-m", "kubelab.cli"]


def cold_cli(folder: Path, env: dict[str, str], home: Path, work: float) -> float:
    """`kubelab sweep -f config.yml --wait -o json` with nothing warm (a fresh home)."""
    start, end = cold_cli_at(folder, env, home, work)
    return end - start


def cold_cli_at(folder: Path, env: dict[str, str], home: Path, work: float) -> tuple[float, float]:
    """The cold CLI's start and exit, wall clock (the sweep's files are timed by that clock)."""
    (folder / "config.yml").write_text(json.dumps(spec(TRIALS, work)))  # YAML is a superset of JSON
    wall = time.time()
    start = time.perf_counter()
    done = subprocess.run(
        [*kubelab_command(), "sweep", "-f", "config.yml", "--wait", "-o", "json"],
        cwd=folder,
        env={**env, "KUBELAB_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    record = json.loads(done.stdout) if done.stdout.startswith("{") else {}
    if done.returncode or record.get("counts", {}).get("succeeded") != TRIALS:
        raise SystemExit(f"the CLI's sweep did not succeed: {done.stderr[-2000:]}")
    shutil.rmtree(home / "warm", ignore_errors=True)  # its idle runners see it and exit
    return wall, wall + elapsed


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def wait_warm(home: Path, deadline_s: float = 90.0) -> None:
    """Until the server's warm driver and runners are idle and done importing (their CPU time
    stops growing), as on a server nobody is using."""
    from kubelab.warm import DRIVER, RUNNER, WarmPool

    deadline = time.monotonic() + deadline_s
    last = -1
    while time.monotonic() < deadline:
        drivers, runners = WarmPool(home, DRIVER).idle(), WarmPool(home, RUNNER).idle()
        if drivers and len(runners) >= RUNNER.size():
            ticks = cpu_ticks(drivers + runners)
            if ticks == last:
                return
            last = ticks
        time.sleep(0.1)
    raise SystemExit(f"the server's warm driver and runners were not ready within {deadline_s:.0f} s")


def warm_rest(server: Any, home: Path, trials: int, work: float) -> float:
    """POST the sweep to the server; until its state file says it ended."""
    from kubelab.sweeps.store import SweepStore

    wait_warm(home)
    start = time.perf_counter()
    response = server.post("sweeps", spec(trials, work))
    response.raise_for_status()
    sweep = SweepStore(home).sweep(response.json()["id"])
    stamp = None
    while True:  # a stat every 2 ms; the state is read only when it changed
        look = sweep.state_mtime()
        if look != stamp:
            stamp = look
            if sweep.read_state().status != "Running":
                break
        time.sleep(0.002)
    elapsed = time.perf_counter() - start
    counts = server.get("sweeps").json()["items"][0]["counts"]
    if counts["succeeded"] != trials:
        raise SystemExit(f"the server's sweep did not succeed: {counts}")
    return elapsed


def fsync_probe(folder: Path, times: int = 20) -> float:
    """Median ms of appending a line to a file and fsyncing it, as a driver does once per trial
    (the study's journal, before the trial's run exists): this disk's part of each trial."""
    taken = []
    with open(folder / "fsync-probe", "ab") as handle:
        for _ in range(times):
            start = time.perf_counter()
            handle.write(b"{}\n")
            handle.flush()
            os.fsync(handle.fileno())
            taken.append(time.perf_counter() - start)
    return statistics.median(taken) * 1000


def measure(
    label: str, env: dict[str, str], repeats: int, overhead_trials: int, work: float
) -> list[dict[str, Any]]:
    """Every kubelab measurement in one environment, pairwise with its floor in each repeat."""
    from jupyter_server_process import JupyterServer

    rows: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        rows.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory(prefix="kubelab-bench-sweep-") as tmp:
        base = Path(tmp)
        root = base / "root"
        root.mkdir()
        (root / "trial.py").write_text(TRIAL)
        machine = {"KUBELAB_MACHINE_DIR": str(base / "machine")}
        env = {**env, **machine}
        with JupyterServer(root, base / "server-home", env=env) as server:
            for repeat in range(repeats):
                f20 = floor(root, env, TRIALS, work)
                cli = cold_cli(root, env, base / f"cli-home-{repeat}", work)
                warm20 = warm_rest(server, base / "server-home", TRIALS, work)
                f_many = floor(root, env, overhead_trials, work)
                warm_many = warm_rest(server, base / "server-home", overhead_trials, work)
                add("floor_s", f20)
                add("cold_s", cli)
                add("warm_s", warm20)
                add("cold_ratio", cli / f20)
                add("warm_ratio", warm20 / f20)
                add("floor_many_s", f_many)
                add("warm_many_s", warm_many)
                extra = (warm_many - f_many) - (warm20 - f20)
                add("per_trial_ms", extra / (overhead_trials - TRIALS) * CONCURRENCY * 1000)
                add("per_trial_all_ms", (warm_many - f_many) / overhead_trials * CONCURRENCY * 1000)
                add("fsync_ms", fsync_probe(base))

    def med(key: str, digits: int = 3) -> float:
        return round(statistics.median(rows[key]), digits)

    common = {"sklearn": label, "trials": TRIALS, "concurrency": CONCURRENCY, "work_s": work}
    common["repeats"] = repeats
    return [
        {"bench": "sweep_cold_cli", **common, "floor_s": med("floor_s"), "sweep_s": med("cold_s")}
        | {"ratio": med("cold_ratio", 2), "ratios": [round(x, 2) for x in rows["cold_ratio"]]}
        | {"target_ratio": 2.0},
        {"bench": "sweep_warm_rest", **common, "floor_s": med("floor_s"), "sweep_s": med("warm_s")}
        | {"ratio": med("warm_ratio", 2), "ratios": [round(x, 2) for x in rows["warm_ratio"]]}
        | {"target_ratio": 1.3},
        {"bench": "sweep_per_trial", **common, "overhead_trials": overhead_trials}
        | {"floor_s": med("floor_many_s"), "sweep_s": med("warm_many_s")}
        | {"ratio": round(med("warm_many_s") / med("floor_many_s"), 2)}
        | {"per_trial_ms": med("per_trial_ms", 1)}
        | {"per_trials_ms": [round(x, 1) for x in rows["per_trial_ms"]]}
        | {"per_trial_with_start_and_end_ms": med("per_trial_all_ms", 1), "target_per_trial_ms": 10}
        | {"fsync_ms": med("fsync_ms", 1)},
    ]


def phases(env: dict[str, str], repeats: int, work: float) -> list[dict[str, Any]]:
    """The cold path, phase by phase (`sweep_phases.py`), without scikit-learn."""
    from sweep_phases import cold_phases, driver_start

    with tempfile.TemporaryDirectory(prefix="kubelab-bench-phases-") as tmp:
        base = Path(tmp)
        root = base / "root"
        root.mkdir()
        (root / "trial.py").write_text(TRIAL)
        env = {**env, "KUBELAB_MACHINE_DIR": str(base / "machine")}
        cold = cold_phases(lambda home: cold_cli_at(root, env, home, work), base, repeats)
    return [cold, {"bench": "sweep_driver_start", "repeats": repeats, **driver_start(SPACE, repeats)}]


def environments(skip_sklearn: bool) -> list[tuple[str, dict[str, str] | None, str]]:
    """(label, environment or None when unavailable, why) for without and with scikit-learn."""
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = [("without", plain, "")]
    if skip_sklearn:
        return [*found, ("with", None, "--no-sklearn")]
    try:
        from peer_venv import overlay

        folder = overlay("sklearn")
    except (OSError, subprocess.CalledProcessError) as exc:
        return [*found, ("with", None, f"scikit-learn could not be installed: {exc}")]
    return [*found, ("with", {**plain, "PYTHONPATH": str(folder)}, "")]


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


def nni_local(work: float, kubelab_s: float, floor_s: float) -> dict[str, Any]:
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
        "nni_ratio_to_floor": round(result["seconds"] / floor_s, 2),
        "kubelab_cold_s": kubelab_s,
        "ratio": round(kubelab_s / result["seconds"], 2),
    }


def load() -> dict[str, Any]:
    one, five, _ = os.getloadavg()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overhead-trials", type=int, default=200, help="the long sweep (> 20 trials)")
    parser.add_argument("--work", type=float, default=0.0, help="seconds each trial 'trains'")
    parser.add_argument("--no-peers", action="store_true", help="skip NNI (its venv is made once)")
    parser.add_argument("--no-sklearn", action="store_true", help="measure without scikit-learn only")
    parser.add_argument("--phases", type=int, default=3, help="cold sweeps timed by phase (0: none)")
    args = parser.parse_args()
    if args.overhead_trials <= TRIALS:
        parser.error(f"--overhead-trials must be more than {TRIALS}")
    os.environ.setdefault("KUBELAB_STOP_GRACE", "2")
    emit: Callable[[dict[str, Any]], None] = lambda line: print(json.dumps(line), flush=True)  # noqa: E731
    emit({"bench": "sweep_machine", "at": "start", **load()})
    first: list[dict[str, Any]] = []
    for label, env, why in environments(args.no_sklearn):
        if env is None:
            emit({"bench": "sweep_cold_cli", "sklearn": label, "skipped": why})
            continue
        lines = measure(label, env, args.repeats, args.overhead_trials, args.work)
        first = first or lines
        for line in lines:
            emit(line)
    if args.phases:
        plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        for line in phases(plain, args.phases, args.work):
            emit(line)
    emit({"bench": "sweep_machine", "at": "end", **load()})
    emit(suggestion_time())
    if args.no_peers:
        emit({"bench": "nni_local", "skipped": "--no-peers"})
    else:
        emit(nni_local(args.work, first[0]["sweep_s"], first[0]["floor_s"]))


if __name__ == "__main__":
    main()
