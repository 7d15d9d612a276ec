"""Sweeps on checkpoints: a trial preempted for a higher-priority run goes on from its checkpoint
as the same trial (not a rerun from step 0, not a failure), under ASHA, whose promoted trials keep
running rather than pausing, so a trial's steps are each trained and reported once."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from sweep_support import trial_runs, wait_sweep

from kubelab.experiments import Experiments
from kubelab.run_timeline import timeline
from kubelab.sweeps.service import Sweeps

CURVE = textwrap.dedent(
    """
    import os, pathlib, sys, time, kubelab
    found = kubelab.latest_checkpoint()
    start = found[0] if found else 0
    print("start", start, flush=True)
    go = pathlib.Path(os.environ["GO_FILE"])
    for step in range(start + 1, 31):
        kubelab.report(step=step, loss=1.0 / step)
        while step >= 10 and not go.exists() and not kubelab.preempted():  # the test's cue to finish
            time.sleep(0.05)
        if step % 5 == 0 or kubelab.preempted():
            kubelab.save_checkpoint(step, lambda d: (d / "s").write_text(str(step)))
        if kubelab.preempted():
            sys.exit(0)
        time.sleep(0.02)
    """
)


def test_a_preempted_trial_goes_on_from_its_checkpoint_as_the_same_trial(
    sweeps: Sweeps, sweep_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    monkeypatch.setenv("GO_FILE", str(sweep_env / "go"))
    (sweep_env / "curve.py").write_text(CURVE)
    sweep_id = sweeps.create(
        {
            "tuner": "batch",
            "batch": [{"lr": 0.1}],
            "concurrency": 1,
            "objective": {"metric": "loss"},
            "early_stopping": {"name": "asha", "args": {"min_resource": 1, "reduction_factor": 2}},
            "trial": {
                "command": ["python", "curve.py"],
                "resources": {"gpus": 1},
                "priority": "low",
                "preemption_grace": 20,
            },
        }
    )["id"]
    lab = Experiments()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (trial := sweeps.get(sweep_id)["trials"]):
        time.sleep(0.05)
    run_id = trial[0]["id"]
    while time.monotonic() < deadline and (lab.get(run_id).get("step") or 0) < 10:
        time.sleep(0.05)
    high = lab.submit({"command": ["python", "-c", "pass"], "resources": {"gpus": 1}, "priority": "high"})
    while time.monotonic() < deadline and lab.get(high["id"])["status"] != "Succeeded":
        time.sleep(0.05)
    (sweep_env / "go").touch()
    done = wait_sweep(sweeps, sweep_id, timeout=90)
    assert done["status"] == "Succeeded", done
    (row,) = sweeps.get(sweep_id)["trials"]
    assert row["result"] == "complete" and row["objective"] == pytest.approx(1 / 30), row
    assert list(trial_runs(sweep_env.parent / "home", sweep_id)) == [0]  # one run: not a rerun
    assert len(trial_runs(sweep_env.parent / "home", sweep_id)[0]) == 1
    run = lab.get(run_id)
    assert any(span.resumed for span in timeline(run["history"])), run["history"]
    log = "".join(lab.logs(run_id))
    assert "start 0" in log and "start 10" in log  # from its checkpoint at step 10, not from 0
    steps = [p["step"] for p in lab.metrics(run_id) if "step" in p]
    assert steps == list(range(1, 31))
