"""Real sweeps on the local backend: every tuner and pruner, failures, budgets, and restarts.

Trials are real subprocesses started by the local runner; they are tiny Python scripts.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from sweep_support import trial_runs, wait_driver_gone, wait_sweep

from kubelab.errors import Conflict, NotFound, ValidationError
from kubelab.experiments import Experiments
from kubelab.sweeps.service import Sweeps

QUADRATIC = "import kubelab; p = kubelab.params(); kubelab.report(loss=(p['x'] - 1) ** 2 + p.get('k', 0))"
NUMERIC = {"x": {"_type": "uniform", "_value": [-2, 2]}, "k": {"_type": "randint", "_value": [0, 3]}}


def spec(**fields: Any) -> dict[str, Any]:
    base = {
        "space": NUMERIC,
        "objective": {"metric": "loss"},
        "max_trials": 3,
        "concurrency": 2,
        "trial": {"command": ["python", "-c", QUADRATIC]},
    }
    base.update(fields)
    return base


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def test_parameters_reach_the_trial_as_arguments_env_and_template(sweeps: Sweeps, sweep_env: Path) -> None:
    write_script(
        sweep_env,
        "trial.py",
        """
        import json, os, sys
        import kubelab
        args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
        env = json.loads(os.environ["KUBELAB_PARAMS"])
        templated = os.environ["TEMPLATED"]
        assert float(args["x"]) == env["x"] == float(templated), (args, env, templated)
        assert args["act"] == env["act"], (args, env)
        assert env["fixed"] == 7  # the template's own params pass through
        kubelab.report(step=0, loss=abs(env["x"]))
        kubelab.report(step=1, loss=abs(env["x"]) / 2)
    """,
    )
    record = sweeps.create(
        spec(
            space={
                "x": {"_type": "uniform", "_value": [-1, 1]},
                "act": {"_type": "choice", "_value": ["relu", "tanh"]},
            },
            max_trials=4,
            trial={"command": "TEMPLATED={{ x }} python trial.py", "params": {"fixed": 7}},
        )
    )
    assert record["status"] == "Running" and record["counts"]["running"] == 0
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded", done
    assert done["counts"] == {
        "running": 0,
        "succeeded": 4,
        "failed": 0,
        "pruned": 0,
        "stopped": 0,
        "interrupted": 0,
    }
    shown = sweeps.get(record["id"])
    trials = sorted(shown["trials"], key=lambda t: t["trial"])
    assert [t["trial"] for t in trials] == [0, 1, 2, 3]
    for row in trials:
        assert row["status"] == "Succeeded" and row["sweep"] == record["id"]
        assert row["objective"] == pytest.approx(abs(row["params"]["x"]) / 2)  # the last value reported
    best = min(trials, key=lambda t: t["objective"])
    assert done["best"] == {
        "trial": best["trial"],
        "id": best["id"],
        "value": best["objective"],
        "params": {"x": best["params"]["x"], "act": best["params"]["act"]},
    }
    assert set(shown["importance"]) <= {"x", "act"} and shown["importance"]
    assert shown["spec"]["trial"]["params"] == {"fixed": 7}


TUNER_CASES: dict[str, dict[str, Any]] = {
    "tpe": {},
    "random": {},
    "evolution": {"tuner": {"name": "evolution", "args": {"population_size": 2}}},
    "cmaes": {},
    "gp": {},
    "qmc": {},
    "anneal": {},
    "grid": {"space": {"x": {"_type": "choice", "_value": [0, 1]}}, "max_trials": 5},
    "bruteforce": {"space": {"x": {"_type": "quniform", "_value": [0, 1, 0.5]}}, "max_trials": 9},
    "batch": {"space": None, "batch": [{"x": 1.5}, {"x": -1}], "max_trials": None},
}


def test_every_tuner_runs_a_real_sweep(sweeps: Sweeps) -> None:
    created = {}
    for name, fields in TUNER_CASES.items():
        data = spec(**{"tuner": name, **fields})
        data = {k: v for k, v in data.items() if v is not None}
        created[name] = sweeps.create(data)["id"]
    expected_trials = {"grid": 2, "bruteforce": 3, "batch": 2}
    for name, sweep_id in created.items():
        done = wait_sweep(sweeps, sweep_id, timeout=90)
        assert done["status"] == "Succeeded", (name, done)
        assert done["tuner"] == name
        count = expected_trials.get(name, 3)
        assert done["counts"]["succeeded"] == count, (name, done)
        if name in expected_trials:
            assert "tried every configuration" in done["reason"], (name, done)
        values = [t["objective"] for t in sweeps.get(sweep_id)["trials"]]
        assert done["best"]["value"] == min(values), (name, values)
    grid = [t["params"]["x"] for t in sweeps.get(created["grid"])["trials"]]
    assert sorted(grid) == [0, 1]
    batch = sorted(t["params"]["x"] for t in sweeps.get(created["batch"])["trials"])
    assert batch == [-1, 1.5]


PRUNERS = {
    "median": {"n_startup_trials": 2, "n_warmup_steps": 1},
    "hyperband": {"min_resource": 1, "max_resource": 2, "reduction_factor": 3},
    "asha": {"min_resource": 1, "reduction_factor": 2},
}


def test_every_pruner_stops_clearly_bad_trials(sweeps: Sweeps, sweep_env: Path) -> None:
    # Three good trials first (concurrency 1, batch order), then two ten times worse.
    write_script(
        sweep_env,
        "curve.py",
        """
        import time, kubelab
        scale = 10.0 if kubelab.params()["quality"] == "bad" else 1.0
        for step in range(8):
            kubelab.report(step=step, loss=scale / (step + 1))
            time.sleep(0.12)
    """,
    )
    batch = [{"quality": q} for q in ("good", "good", "good", "bad", "bad")]
    created = {
        name: sweeps.create(
            {
                "tuner": "batch",
                "batch": batch,
                "concurrency": 1,
                "objective": {"metric": "loss"},
                "early_stopping": {"name": name, "args": args},
                "trial": {"command": ["python", "curve.py"]},
            }
        )["id"]
        for name, args in PRUNERS.items()
    }
    lab = Experiments()
    for name, sweep_id in created.items():
        done = wait_sweep(sweeps, sweep_id, timeout=90)
        assert done["status"] == "Succeeded", (name, done)
        assert done["early_stopping"] == name
        rows = {t["trial"]: t for t in sweeps.get(sweep_id)["trials"]}
        assert [rows[n]["result"] for n in (0, 1, 2)] == ["complete"] * 3, (name, rows)
        pruned = [n for n in (3, 4) if rows[n]["result"] == "pruned"]
        assert pruned, (name, rows)
        for n in pruned:
            run = lab.get(rows[n]["id"])
            assert run["status"] == "Pruned" and run["reason"] == "pruned by early stopping", run
            assert run["step"] < 7  # stopped before its last step
            assert "pruned at step" in rows[n]["result_reason"]
        assert done["counts"]["pruned"] == len(pruned)


def test_crashing_trials_fail_the_sweep_after_max_failed_trials(sweeps: Sweeps) -> None:
    crash = "import kubelab, sys; p = kubelab.params(); sys.exit(3) if p['x'] > 0 else kubelab.report(loss=1)"
    record = sweeps.create(
        spec(
            space={"x": {"_type": "choice", "_value": [1, 2]}},
            tuner="random",
            max_trials=10,
            max_failed_trials=1,
            concurrency=1,
            trial={"command": ["python", "-c", crash]},
        )
    )
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Failed", done
    assert "2 trials failed, more than max_failed_trials (1)" in done["reason"]
    assert "replica 0 exited with code 3" in done["reason"]
    assert done["counts"]["failed"] == 2 and done["trials_started"] == 2  # nothing started after
    rows = sweeps.get(record["id"])["trials"]
    assert all(r["result"] == "failed" and r["status"] == "Failed" for r in rows)


def test_a_trial_that_never_reports_the_objective_counts_as_failed(sweeps: Sweeps) -> None:
    record = sweeps.create(
        spec(
            tuner="random",
            max_trials=2,
            trial={"command": ["python", "-c", "import kubelab; kubelab.report(val_loss=1)"]},
        )
    )
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Failed", done
    assert done["counts"]["failed"] == 2 and done["best"] is None
    assert "no trial completed with a 'loss' result" in done["reason"]
    rows = sweeps.get(record["id"])["trials"]
    for row in rows:
        assert row["status"] == "Succeeded"  # the process was fine; the sweep could not use it
        assert row["result_reason"] == (
            f"trial {row['trial']} finished without reporting 'loss' (it reported val_loss; did you mean 'val_loss'?)"
        )


def test_non_finite_objective_is_a_failed_trial(sweeps: Sweeps) -> None:
    record = sweeps.create(
        spec(
            tuner="random",
            max_trials=1,
            trial={"command": ["python", "-c", "import kubelab; kubelab.report(loss=float('nan'))"]},
        )
    )
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Failed"
    assert (
        sweeps.get(record["id"])["trials"][0]["result_reason"] == "trial 0 reported a non-finite 'loss' (nan)"
    )


@pytest.mark.parametrize("point", ["after-ask", "before-submit", "after-submit", "after-tell"])
def test_driver_killed_at_each_crash_window_loses_and_repeats_nothing(
    sweeps: Sweeps, sweep_env: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    monkeypatch.setenv("KUBELAB_SWEEP_CRASH", f"{point}:2")
    record = sweeps.create(spec(tuner="random", max_trials=5))
    wait_driver_gone(sweeps, record["id"])
    assert sweeps.record(sweeps.sweep(record["id"]))["status"] == "Running"  # died, did not finish
    monkeypatch.delenv("KUBELAB_SWEEP_CRASH")
    assert sweeps.ensure_driver(sweeps.sweep(record["id"]))
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded", done
    assert_exactly_once(sweeps, record["id"], 5)


def test_a_ledger_behind_the_study_is_rebuilt_from_the_study_and_the_runs(
    sweeps: Sweeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The driver writes its ledger at most every 60 s here, so when it dies at its fourth tell
    # the ledger holds no trial at all: the study and the run directories are the only truth.
    monkeypatch.setenv("KUBELAB_SWEEP_LEDGER_EVERY", "60")
    monkeypatch.setenv("KUBELAB_SWEEP_CRASH", "after-tell:4")
    record = sweeps.create(spec(tuner="random", max_trials=6))
    wait_driver_gone(sweeps, record["id"])
    assert sweeps.sweep(record["id"]).read_state().trials == {}
    monkeypatch.delenv("KUBELAB_SWEEP_CRASH")
    monkeypatch.delenv("KUBELAB_SWEEP_LEDGER_EVERY")
    assert sweeps.ensure_driver(sweeps.sweep(record["id"]))
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded", done
    assert_exactly_once(sweeps, record["id"], 6)


def assert_exactly_once(sweeps: Sweeps, sweep_id: str, count: int) -> None:
    """Every trial number 0..count-1 ran exactly once, and the ledger, study and runs agree."""
    runs = trial_runs(sweeps.lab.home, sweep_id)
    assert sorted(runs) == list(range(count)), runs
    assert all(len(ids) == 1 for ids in runs.values()), runs
    state = sweeps.sweep(sweep_id).read_state()
    assert {e.number: e.run_id for e in state.entries()} == {n: ids[0] for n, ids in runs.items()}
    assert all(e.state == "complete" and e.value is not None for e in state.entries())
    import optuna

    study = optuna.load_study(study_name=sweep_id, storage=sweeps.sweep(sweep_id).storage())
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * count
    assert {t.number: t.value for t in study.trials} == {e.number: e.value for e in state.entries()}


def test_sigkilled_driver_is_restarted_by_whoever_looks_and_reattaches(
    sweeps: Sweeps, sweep_env: Path
) -> None:
    write_script(
        sweep_env,
        "slow.py",
        """
        import time, kubelab
        time.sleep(0.4)
        kubelab.report(loss=kubelab.params()["x"] ** 2)
    """,
    )
    record = sweeps.create(spec(tuner="tpe", max_trials=6, trial={"command": ["python", "slow.py"]}))
    wait_sweep(sweeps, record["id"], until=lambda r: r["finished"] >= 2 and r["counts"]["running"] == 2)
    state = sweeps.sweep(record["id"]).read_state()
    running = {e.number: e.run_id for e in state.entries() if not e.final}
    assert state.driver_pid is not None
    os.kill(state.driver_pid, signal.SIGKILL)
    wait_driver_gone(sweeps, record["id"])
    sweeps.list()  # `kubelab sweep ls` (and the server's watcher) restart dead drivers
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded", done
    assert_exactly_once(sweeps, record["id"], 6)
    after = sweeps.sweep(record["id"]).read_state()
    for number, run_id in running.items():  # trials running at the kill were followed again
        entry = after.entry(number)
        assert entry is not None and entry.run_id == run_id


def test_resume_reruns_the_trials_the_stop_interrupted_outside_the_budget(
    sweeps: Sweeps, sweep_env: Path
) -> None:
    write_script(
        sweep_env,
        "waits.py",
        """
        import os, time, kubelab
        while not os.path.exists("go"):
            time.sleep(0.05)
        kubelab.report(loss=1.0)
    """,
    )
    record = sweeps.create(spec(tuner="random", max_trials=3, trial={"command": ["python", "waits.py"]}))
    wait_sweep(sweeps, record["id"], until=lambda r: r["counts"]["running"] == 2)
    stopped = sweeps.stop(record["id"])
    assert stopped["status"] == "Stopped" and stopped["reason"] == "stopped by user", stopped
    assert stopped["counts"]["interrupted"] == 2 and stopped["counts"]["stopped"] == 0, stopped
    assert stopped["trials_started"] == 0 and stopped["finished"] == 0  # nothing spent of max_trials
    assert {t["status"] for t in sweeps.get(record["id"])["trials"]} == {"Stopped"}
    interrupted = {e.number: e.params for e in sweeps.sweep(record["id"]).read_state().entries()}
    assert sorted(interrupted) == [0, 1]
    with pytest.raises(Conflict, match="not running"):
        sweeps.stop(record["id"])
    (sweep_env / "go").write_text("")
    resumed = sweeps.resume(record["id"])  # the same budget: the interrupted trials did not use it
    assert resumed["status"] == "Running" and resumed["max_trials"] == 3
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded", done
    assert done["counts"] == {
        "running": 0,
        "succeeded": 3,
        "failed": 0,
        "pruned": 0,
        "stopped": 0,
        "interrupted": 2,
    }
    assert done["trials_started"] == 3 and done["finished"] == 3 and done["max_trials"] == 3
    state = sweeps.sweep(record["id"]).read_state()
    assert [e.state for e in state.entries()] == ["interrupted"] * 2 + ["complete"] * 3
    # The interrupted trials' parameters run first, then the tuner's own next suggestion (one
    # asked ahead while the first two ran keeps its number, 2, and runs after the reruns).
    runs = trial_runs(sweeps.lab.home, record["id"])
    assert sorted(runs) == [0, 1, 2, 3, 4] and all(len(ids) == 1 for ids in runs.values()), runs
    again = [e for e in state.entries()[2:] if e.params in interrupted.values()]
    fresh = [e for e in state.entries()[2:] if e.params not in interrupted.values()]
    assert [e.params for e in again] == [interrupted[0], interrupted[1]] and len(fresh) == 1
    assert all(str(fresh[0].run_id) > str(e.run_id) for e in again)  # ids sort by creation time
    import optuna

    study = optuna.load_study(study_name=record["id"], storage=sweeps.sweep(record["id"]).storage())
    origins = {
        t.number: int(t.user_attrs["kubelab_rerun_of"])
        for t in study.trials
        if "kubelab_rerun_of" in t.user_attrs
    }
    assert {n: study.trials[n].params for n in origins} == {
        e.number: study.trials[origins[e.number]].params for e in again
    }
    with pytest.raises(Conflict, match="max_trials"):
        sweeps.resume(record["id"])  # now the budget is used


def test_with_every_slot_busy_the_next_trial_is_asked_ahead_and_run_once(
    sweeps: Sweeps, sweep_env: Path
) -> None:
    """The tuner's ask (milliseconds, more with every finished trial) is off the path from one
    trial's end to the next one's start: while both slots run, trial 2 is already in the study,
    without a run until a slot frees."""
    import optuna

    write_script(
        sweep_env,
        "gate.py",
        """
        import os, time, kubelab
        while not os.path.exists("go"):
            time.sleep(0.05)
        kubelab.report(loss=kubelab.params()["x"] ** 2)
    """,
    )
    record = sweeps.create(spec(tuner="random", max_trials=4, trial={"command": ["python", "gate.py"]}))
    wait_sweep(sweeps, record["id"], until=lambda r: r["counts"]["running"] == 2)
    storage = sweeps.sweep(record["id"]).storage()
    deadline = time.monotonic() + 30
    while len(optuna.load_study(study_name=record["id"], storage=storage).trials) < 3:
        assert time.monotonic() < deadline, "no trial was asked ahead"
        time.sleep(0.05)
    asked = optuna.load_study(study_name=record["id"], storage=storage).trials
    assert [t.state.name for t in asked] == ["RUNNING"] * 3
    assert sorted(trial_runs(sweeps.lab.home, record["id"])) == [0, 1]  # trial 2: asked, not started
    (sweep_env / "go").write_text("")
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded", done
    assert_exactly_once(sweeps, record["id"], 4)


def test_extend_a_running_and_a_finished_sweep(sweeps: Sweeps, sweep_env: Path) -> None:
    write_script(
        sweep_env,
        "gate.py",
        """
        import os, time, kubelab
        while not os.path.exists("go"):
            time.sleep(0.05)
        kubelab.report(loss=kubelab.params()["x"])
    """,
    )
    record = sweeps.create(spec(tuner="random", max_trials=2, trial={"command": ["python", "gate.py"]}))
    wait_sweep(sweeps, record["id"], until=lambda r: r["counts"]["running"] == 2)
    extended = sweeps.extend(record["id"], {"max_trials": 3})
    assert extended["max_trials"] == 3 and extended["status"] == "Running"
    (sweep_env / "go").write_text("")
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded" and done["counts"]["succeeded"] == 3, done
    again = sweeps.extend(record["id"], {"max_trials": 4})  # ended by its budget: carries on
    assert again["status"] == "Running"
    done = wait_sweep(sweeps, record["id"])
    assert done["counts"]["succeeded"] == 4 and done["max_trials"] == 4, done
    with pytest.raises(ValidationError) as bad:
        sweeps.extend(record["id"], {"max_trials": 2, "max_trails": 9, "max_duration": "soon"})
    reasons = {f.path: f.reason for f in bad.value.fields}
    assert reasons["max_trials"] == "must be at least 4: 4 trials have already started"
    assert reasons["max_trails"] == "unknown field; did you mean 'max_trials'?"
    assert "not a duration" in reasons["max_duration"]
    with pytest.raises(ValidationError, match="give at least one"):
        sweeps.extend(record["id"], {})


def test_max_duration_stops_running_trials(sweeps: Sweeps) -> None:
    record = sweeps.create(
        spec(
            tuner="random",
            max_trials=None,
            max_duration="1h",
            trial={"command": ["python", "-c", "import time; time.sleep(60)"]},
        )
    )
    wait_sweep(sweeps, record["id"], until=lambda r: r["counts"]["running"] == 2)
    assert sweeps.extend(record["id"], {"max_duration": 0.5})["max_duration"] == 0.5  # already past it
    done = wait_sweep(sweeps, record["id"], timeout=30)
    assert done["status"] == "Failed", done
    assert done["reason"] == (
        "reached max_duration (0.5s), but no trial completed with a 'loss' result; "
        "last: trial 1 was stopped: stopped by user"
    )
    assert done["counts"]["stopped"] == 2 and done["counts"]["running"] == 0
    assert done["duration"] >= 0.5


BAD_SPECS = {
    "loguniform low <= 0": ({"lr": {"_type": "loguniform", "_value": [0, 1]}}, "space.lr"),
    "q <= 0": ({"x": {"_type": "quniform", "_value": [0, 1, 0]}}, "space.x"),
    "empty choice": ({"act": {"_type": "choice", "_value": []}}, "space.act"),
    "unknown type": ({"x": {"_type": "uniformly", "_value": [0, 1]}}, "space.x"),
}


@pytest.mark.parametrize("case", list(BAD_SPECS))
def test_bad_search_spaces_start_nothing(sweeps: Sweeps, case: str) -> None:
    space, path = BAD_SPECS[case]
    with pytest.raises(ValidationError) as refused:
        sweeps.create(spec(space=space))
    assert any(f.path.startswith(path) for f in refused.value.fields), refused.value.message()
    assert_nothing_started(sweeps)


def test_unknown_tuner_and_impossible_tuner_start_nothing(sweeps: Sweeps) -> None:
    with pytest.raises(ValidationError) as refused:
        sweeps.create(spec(tuner="tpee"))
    assert "unknown tuner 'tpee'; did you mean 'tpe'?" in refused.value.message()
    nested = {
        "l": {"_type": "choice", "_value": [{"_name": "a", "x": {"_type": "uniform", "_value": [0, 1]}}]}
    }
    with pytest.raises(ValidationError) as refused:
        sweeps.create(spec(tuner="grid", space=nested))
    assert "grid cannot search 'x' inside a nested choice" in refused.value.message()
    assert_nothing_started(sweeps)


def test_duplicate_parameter_names_start_nothing(sweeps: Sweeps, sweep_env: Path) -> None:
    (sweep_env / "space.yml").write_text(
        "lr: {_type: uniform, _value: [0, 1]}\nlr: {_type: uniform, _value: [0, 2]}\n"
    )
    with pytest.raises(ValidationError) as refused:
        sweeps.create(spec(space=None, space_file="space.yml"))
    assert "duplicate key 'lr'" in refused.value.message()
    assert_nothing_started(sweeps)


def test_trial_template_problems_start_nothing(sweeps: Sweeps) -> None:
    with pytest.raises(ValidationError) as refused:
        sweeps.create(spec(trial={"command": ["python", "x.py"], "workdir": "missing"}))
    assert [(f.path, f.reason) for f in refused.value.fields] == [
        ("trial.workdir", "'missing' does not exist")
    ]
    with pytest.raises(ValidationError) as refused:
        sweeps.create(spec(objective={"metric": "loss", "direction": "down"}))
    assert "objective.direction" in refused.value.message()
    assert_nothing_started(sweeps)


def assert_nothing_started(sweeps: Sweeps) -> None:
    root = sweeps.store.root
    assert not root.exists() or list(root.iterdir()) == []
    runs = sweeps.lab.runs_root
    assert not runs.exists() or list(runs.iterdir()) == []


def test_unknown_sweep_ids(sweeps: Sweeps) -> None:
    with pytest.raises(NotFound):
        sweeps.get("nope")
    with pytest.raises(NotFound):
        sweeps.stop("0123456789ab")


def test_a_second_driver_leaves_the_sweep_to_the_first(sweeps: Sweeps, sweep_env: Path) -> None:
    from kubelab.sweeps.driver import Driver

    write_script(
        sweep_env,
        "gate.py",
        """
        import os, time, kubelab
        while not os.path.exists("go"):
            time.sleep(0.05)
        kubelab.report(loss=1)
    """,
    )
    record = sweeps.create(spec(tuner="random", max_trials=1, trial={"command": ["python", "gate.py"]}))
    wait_sweep(sweeps, record["id"], until=lambda r: r["counts"]["running"] == 1)
    sweep = sweeps.sweep(record["id"])
    first = sweep.read_state().driver_pid
    assert Driver(sweep).main() == 0  # the lock is held: this one leaves at once
    assert sweep.read_state().driver_pid == first and sweep.driver_alive()
    assert not sweeps.ensure_driver(sweep)
    (sweep_env / "go").write_text("")
    done = wait_sweep(sweeps, record["id"])
    assert Driver(sweep).main() == 0  # finished: nothing to do, nothing written
    assert sweeps.record(sweep) == done and not sweeps.ensure_driver(sweep)
