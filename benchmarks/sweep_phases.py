"""Where a cold `kubelab sweep --wait` spends its time, for `bench_sweep.py --phases N`.

Two views, both from real runs:

- the phases of whole cold CLI sweeps, from the files' own timestamps (the sweep's
  `created_at` and `finished_at`, each trial run's `created_at`, `started_at` and
  `finished_at`) and the CLI's start and exit as the benchmark saw them;
- what a cold driver pays before its first trial, each part in a fresh interpreter: the bare
  interpreter, importing the driver module, importing Optuna, and opening the sweep's
  journal study with its first TPE ask (what `python -X importtime` and cProfile showed to be
  the driver's start).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab.records import parse_iso
from kubelab.sweeps.store import SweepStore

PHASES = (
    ("cli_to_recorded_ms", "CLI start -> sweep recorded (interpreter, CLI imports, spec, folder)"),
    ("recorded_to_first_submit_ms", "sweep recorded -> first trial submitted (driver, Optuna, study, ask)"),
    ("first_submit_to_running_ms", "first submit -> first trial running (hand-over to a runner)"),
    ("trials_ms", "first trial running -> last trial ended"),
    ("last_end_to_sweep_end_ms", "last trial ended -> sweep ended (end detection, tell, ledger)"),
    ("sweep_end_to_cli_exit_ms", "sweep ended -> CLI exits (the CLI sees the state, prints the record)"),
)


def phases_of(home: Path, cli_start: float, cli_exit: float) -> dict[str, float]:
    """The phases (ms) of the one sweep in `home`, timed by its files; clock: wall time."""
    sweeps = SweepStore(home).all()
    sweep = sweeps[0]
    state = sweep.read_state()
    runs = []
    for entry in state.entries():
        status = json.loads((home / "runs" / str(entry.run_id) / "status.json").read_text())
        runs.append(status)
    created = [parse_iso(r["created_at"]) for r in runs]
    started = [parse_iso(r["started_at"]) for r in runs if r.get("started_at")]
    finished = [parse_iso(r["finished_at"]) for r in runs if r.get("finished_at")]
    recorded, ended = parse_iso(state.created_at), parse_iso(str(state.finished_at))
    points = [cli_start, recorded, min(created), min(started), max(finished), ended, cli_exit]
    pairs = zip(PHASES, points[:-1], points[1:], strict=True)
    return {key: round((b - a) * 1000, 1) for (key, _), a, b in pairs}


DRIVER_PARTS = """
import sys, tempfile, time
from pathlib import Path
t0 = time.perf_counter()
import kubelab.sweeps.driver
t1 = time.perf_counter()
import optuna
t2 = time.perf_counter()
from kubelab.sweeps.space import SearchSpace
from kubelab.sweeps.store import SweepDirectory
from kubelab.sweeps.journal import GroupCommitBackend
from kubelab.sweeps.tuners import Tuner
optuna.logging.set_verbosity(optuna.logging.WARNING)
with tempfile.TemporaryDirectory() as tmp:
    sweep = SweepDirectory(Path(tmp))
    storage = sweep.storage(GroupCommitBackend(str(sweep.study_file)))
    tuner = Tuner(SearchSpace.parse({space!r}), "tpe", storage=storage, study_name="bench")
    tuner.ask()
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def driver_start(space: dict[str, Any], repeats: int) -> dict[str, float]:
    """Medians (ms) of a cold driver's start, each part measured in a fresh interpreter."""
    rows: dict[str, list[float]] = {}
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        rows.setdefault("interpreter_ms", []).append((time.perf_counter() - start) * 1000)
        script = DRIVER_PARTS.format(space=space)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        driver, optuna, study = (float(x) * 1000 for x in done.stdout.split())
        rows.setdefault("import_driver_module_ms", []).append(driver)
        rows.setdefault("import_optuna_ms", []).append(optuna)
        rows.setdefault("study_and_first_ask_ms", []).append(study)
    return {key: round(statistics.median(values), 1) for key, values in rows.items()}


def cold_phases(run_cli: Callable[[Path], tuple[float, float]], base: Path, repeats: int) -> dict[str, Any]:
    """`repeats` cold CLI sweeps (`run_cli(home)` gives the CLI's start and exit, wall clock)."""
    rows: dict[str, list[float]] = {}
    for repeat in range(repeats):
        home = base / f"phases-home-{repeat}"
        cli_start, cli_exit = run_cli(home)
        for key, value in phases_of(home, cli_start, cli_exit).items():
            rows.setdefault(key, []).append(value)
    medians = {key: round(statistics.median(values), 1) for key, values in rows.items()}
    return {"bench": "sweep_cold_phases", "repeats": repeats, **medians, "phases": dict(PHASES)}
