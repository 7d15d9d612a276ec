"""Population based training (NNI's PBTTuner): generations of real trial processes, each member
going on from a checkpoint copied from its parent's run, with perturbed hyperparameters; and the
inputs it refuses before anything starts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sweep_support import trial_runs, wait_driver_gone, wait_sweep

from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.sweeps.service import Sweeps

# Adds lr to its value each step, from the checkpoint's value and step (0 without one), up to
# KUBELAB_STOP_STEP; then saves a checkpoint there. The value proves which checkpoint it read.
MEMBER = textwrap.dedent(
    """
    import os, time, kubelab
    lr = kubelab.params()["lr"]
    go = os.environ.get("GO_FILE")  # a test's cue for generation 1 to go on
    while go and os.environ["KUBELAB_PBT_GENERATION"] == "1" and not os.path.exists(go):
        time.sleep(0.05)
    found = kubelab.latest_checkpoint()
    start, value = 0, 0.0
    if found:
        start, folder = found
        value = float((folder / "value").read_text())
    assert start == int(os.environ["KUBELAB_START_STEP"]), (start, os.environ["KUBELAB_START_STEP"])
    stop = int(os.environ["KUBELAB_STOP_STEP"])
    for step in range(start + 1, stop + 1):
        value += lr
        kubelab.report(step=step, default=value)
    if not os.environ.get("NO_CHECKPOINT"):
        kubelab.save_checkpoint(stop, lambda d: (d / "value").write_text(repr(value)))
    kubelab.report_final(value)
    """
)
SPACE = {"lr": {"_type": "uniform", "_value": [0.1, 1.0]}, "opt": {"_type": "choice", "_value": ["a", "b"]}}
PBT_ARGS = {
    "optimize_mode": "maximize",
    "population_size": 2,
    "fraction": 0.5,
    "factors": [1.2, 0.8],
    "resample_probability": 0,
    "steps_per_generation": 3,
}


def nni_config(args: dict[str, Any], space: dict[str, Any] | None = None, trials: int = 6) -> dict[str, Any]:
    return {
        "nni": {
            "trialCommand": "python3 member.py",
            "trialCodeDirectory": ".",
            "searchSpace": SPACE if space is None else space,
            "tuner": {"name": "PBTTuner", "classArgs": args},
            "maxTrialNumber": trials,
            "trialConcurrency": 2,
        }
    }


def test_an_nni_pbt_config_runs_generations_from_checkpoints(sweeps: Sweeps, sweep_env: Path) -> None:
    (sweep_env / "member.py").write_text(MEMBER)
    sweep_id = sweeps.create(nni_config(PBT_ARGS))["id"]
    done = wait_sweep(sweeps, sweep_id, timeout=120)
    assert done["status"] == "Succeeded", done
    assert done["tuner"] == "pbt" and done["counts"]["succeeded"] == 6
    rows = {row["trial"]: row for row in sweeps.get(sweep_id)["trials"]}
    lab = Experiments()
    generations: dict[int, list[dict[str, Any]]] = {}
    for row in rows.values():
        generations.setdefault(row["lineage"]["generation"], []).append(row)
    assert sorted(generations) == [0, 1, 2]
    assert all(sorted(r["lineage"]["member"] for r in g) == [0, 1] for g in generations.values())
    for row in generations[0]:
        assert row["lineage"]["parent"] is None and row["lineage"]["start_step"] == 0
        assert [p["step"] for p in lab.metrics(row["id"]) if "step" in p] == [1, 2, 3]
    exploited = 0
    for generation in (1, 2):
        previous = {r["trial"]: r for r in generations[generation - 1]}
        best = max(previous.values(), key=lambda r: r["objective"])
        for row in generations[generation]:
            lineage = row["lineage"]
            parent = rows[lineage["parent"]]
            assert lineage["parent"] in previous and lineage["from_run"] == parent["id"]
            assert lineage["start_step"] == 3 * generation  # the parent's checkpoint step
            steps = [p["step"] for p in lab.metrics(row["id"]) if "step" in p]
            assert steps == [3 * generation + 1, 3 * generation + 2, 3 * generation + 3]  # not from 0
            first = next(p for p in lab.metrics(row["id"]) if p.get("step") == steps[0])
            lr = row["params"]["lr"]
            # it read the parent's checkpoint: its value goes on from the parent's result
            assert first["metrics"]["default"] == pytest.approx(parent["objective"] + lr)
            assert row["params"]["opt"] == parent["params"]["opt"]  # choices change only by resampling
            if lineage["exploited"]:
                exploited += 1
                assert lineage["parent"] == best["trial"]  # the bottom half copies the top half
                scaled = [min(max(parent["params"]["lr"] * f, 0.1), 1.0) for f in (1.2, 0.8)]
                assert lr == pytest.approx(scaled[0]) or lr == pytest.approx(scaled[1]), (lr, scaled)
            else:
                assert lineage["parent"] == previous[lineage["parent"]]["trial"]
                assert parent["lineage"]["member"] == lineage["member"] and row["params"] == parent["params"]
    assert exploited == 2  # one member of two is replaced in each new generation
    shown = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "sweep", "show", sweep_id],
        capture_output=True,
        text=True,
        cwd=sweep_env,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "LINEAGE" in shown.stdout and " at step 3 (exploited)" in shown.stdout, shown.stdout


def test_a_member_without_a_checkpoint_fails_the_sweep_before_the_next_generation(
    sweeps: Sweeps, sweep_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_CHECKPOINT", "1")
    (sweep_env / "member.py").write_text(MEMBER)
    sweep_id = sweeps.create(nni_config(PBT_ARGS, trials=4))["id"]
    done = wait_sweep(sweeps, sweep_id, timeout=60)
    assert done["status"] == "Failed", done
    assert "pbt cannot start generation 1: trial" in done["reason"], done["reason"]
    assert "saved no checkpoint" in done["reason"] and "kubelab.save_checkpoint" in done["reason"]
    assert sorted(trial_runs(sweep_env.parent / "home", sweep_id)) == [0, 1]  # nothing of generation 1


@pytest.mark.parametrize(
    ("change", "space", "field", "reason"),
    [
        ({"population_size": 1}, None, "tuner.args.population_size", "must be at least 2, not 1"),
        ({"fraction": 0.6}, None, "tuner.args.fraction", "must be at most 0.5, not 0.6"),
        ({"fraction": 0}, None, "tuner.args.fraction", "must be above 0, not 0"),
        ({"factors": []}, None, "tuner.args.factors", "must be a non-empty list of numbers"),
        ({"factors": [1.2, 0]}, None, "tuner.args.factors", "must be numbers above 0, not 0"),
        (
            {},
            {"opt": {"_type": "choice", "_value": ["a", "b"]}},
            "space",
            "pbt perturbs numeric parameters by its factors, and this space has only choices",
        ),
        (
            {},
            {
                "lr": {"_type": "uniform", "_value": [0.1, 1.0]},
                "layer": {
                    "_type": "choice",
                    "_value": [{"_name": "conv", "k": {"_type": "randint", "_value": [1, 4]}}],
                },
            },
            "space.layer",
            "pbt cannot perturb 'layer': nested choices",
        ),
    ],
)
def test_bad_pbt_input_is_refused_naming_the_field(
    sweeps: Sweeps,
    sweep_env: Path,
    change: dict[str, Any],
    space: dict[str, Any] | None,
    field: str,
    reason: str,
) -> None:
    (sweep_env / "member.py").write_text(MEMBER)
    with pytest.raises(ValidationError) as refused:
        sweeps.create(nni_config({**PBT_ARGS, **change}, space))
    found = {f.path: f.reason for f in refused.value.fields}
    assert field in found and reason in found[field], found
    assert not sweeps.store.root.exists() or not list(sweeps.store.root.iterdir())  # nothing started
    assert not list((sweep_env.parent / "home" / "runs").glob("*/status.json"))


def test_max_trials_must_allow_two_generations(sweeps: Sweeps, sweep_env: Path) -> None:
    with pytest.raises(ValidationError) as refused:
        sweeps.create(nni_config(PBT_ARGS, trials=3))
    assert "max_trials: must be at least 4 for pbt" in refused.value.message()


# NNI's PBT trial, unchanged: it loads from load_checkpoint_dir and saves into save_checkpoint_dir.
NNI_MEMBER = textwrap.dedent(
    """
    import os, nni
    params = nni.get_next_parameter()
    saved = os.path.join(params["load_checkpoint_dir"], "value")
    value = float(open(saved).read()) if os.path.isfile(saved) else 0.0
    value += params["lr"]
    nni.report_intermediate_result(value)
    with open(os.path.join(params["save_checkpoint_dir"], "value"), "w") as f:
        f.write(repr(value))
    nni.report_final_result(value)
    """
)


def test_an_nni_pbt_trial_runs_unchanged(sweeps: Sweeps, sweep_env: Path) -> None:
    (sweep_env / "member.py").write_text(NNI_MEMBER)
    args = {k: v for k, v in PBT_ARGS.items() if k != "steps_per_generation"}
    args["all_checkpoint_dir"] = "~/nni/checkpoint"  # NNI's; each member's checkpoints stay in its run
    sweep_id = sweeps.create(nni_config(args, trials=4))["id"]
    done = wait_sweep(sweeps, sweep_id, timeout=120)
    assert done["status"] == "Succeeded", done
    rows = {row["trial"]: row for row in sweeps.get(sweep_id)["trials"]}
    second = [r for r in rows.values() if r["lineage"]["generation"] == 1]
    assert len(second) == 2
    for row in second:
        parent = rows[row["lineage"]["parent"]]
        assert row["lineage"]["start_step"] == 1  # the generation the parent trained
        assert row["objective"] == pytest.approx(parent["objective"] + row["params"]["lr"])


@pytest.mark.parametrize("point", ["after-ask:3", "after-submit:4"])
def test_a_driver_killed_in_a_new_generation_goes_on_with_the_same_plan(
    sweeps: Sweeps, sweep_env: Path, monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    (sweep_env / "member.py").write_text(MEMBER)
    monkeypatch.setenv("KUBELAB_SWEEP_CRASH", point)  # the 3rd ask and 4th submit are generation 1's
    sweep_id = sweeps.create(nni_config(PBT_ARGS))["id"]
    wait_driver_gone(sweeps, sweep_id)
    assert sweeps.record(sweeps.sweep(sweep_id))["status"] == "Running"  # died, did not finish
    monkeypatch.delenv("KUBELAB_SWEEP_CRASH")
    assert sweeps.ensure_driver(sweeps.sweep(sweep_id))
    done = wait_sweep(sweeps, sweep_id, timeout=120)
    assert done["status"] == "Succeeded", done
    runs = trial_runs(sweep_env.parent / "home", sweep_id)
    assert sorted(runs) == list(range(6)) and all(len(ids) == 1 for ids in runs.values()), runs
    rows = sweeps.get(sweep_id)["trials"]
    members = sorted((r["lineage"]["generation"], r["lineage"]["member"]) for r in rows)
    assert members == [(g, m) for g in range(3) for m in range(2)]  # each member once per generation
    for row in rows:
        if row["lineage"]["generation"]:
            steps = [p["step"] for p in Experiments().metrics(row["id"]) if "step" in p]
            assert steps[0] == row["lineage"]["start_step"] + 1 > 1, (row["lineage"], steps)


def test_a_stopped_sweep_reruns_its_interrupted_members_with_their_lineage(
    sweeps: Sweeps, sweep_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (sweep_env / "member.py").write_text(MEMBER)
    monkeypatch.setenv("GO_FILE", str(sweep_env / "go"))
    sweep_id = sweeps.create(nni_config(PBT_ARGS))["id"]

    def second_generation_running(record: dict[str, Any]) -> bool:
        return bool(record["trials_started"] == 4 and record["counts"]["running"] == 2)

    wait_sweep(sweeps, sweep_id, until=second_generation_running)
    before = {r["trial"]: r for r in sweeps.get(sweep_id)["trials"] if r["lineage"]["generation"] == 1}
    assert sweeps.stop(sweep_id)["status"] == "Stopped"
    (sweep_env / "go").touch()
    sweeps.resume(sweep_id)
    done = wait_sweep(sweeps, sweep_id, timeout=120)
    assert done["status"] == "Succeeded" and done["counts"]["interrupted"] == 2, done
    rows = sweeps.get(sweep_id)["trials"]
    complete = sorted(
        (r["lineage"]["generation"], r["lineage"]["member"]) for r in rows if r["result"] == "complete"
    )
    assert complete == [(g, m) for g in range(3) for m in range(2)]
    for row in rows:
        if row["lineage"]["generation"] == 1 and row["result"] == "complete":
            (first,) = [b for b in before.values() if b["lineage"]["member"] == row["lineage"]["member"]]
            assert row["trial"] not in before and row["lineage"] == first["lineage"]  # the same plan again
            assert row["params"] == first["params"]
