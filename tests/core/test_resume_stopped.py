"""Resume after Stop on the local backend: a stopped run starts again as the same run from its
latest checkpoint (API, CLI), its metrics continuous; anything but a Stopped run is refused."""

from __future__ import annotations

import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kubelab_testing import wait_until

from kubelab.errors import Conflict, NotFound
from kubelab.experiments import Experiments

Cli = Callable[..., subprocess.CompletedProcess[str]]

TRAIN = textwrap.dedent(
    """
    import os, pathlib, sys, time, kubelab
    found = kubelab.latest_checkpoint()
    start = found[0] if found else 0
    print("start", start, "restart", kubelab.restart_count(), flush=True)
    go = pathlib.Path(os.environ["GO_FILE"])
    step = start
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        step += 1
        kubelab.report(step=step, loss=1.0 / step)
        if kubelab.preempted():  # a stop's SIGTERM: save where it is, then end
            kubelab.save_checkpoint(step, lambda d: (d / "s").write_text(str(step)))
            sys.exit(0)
        if step % 5 == 0:
            kubelab.save_checkpoint(step, lambda d: (d / "s").write_text(str(step)))
        if go.exists() and step >= start + 3:
            break
        time.sleep(0.02)
    """
)


def poll(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def stopped_with_a_checkpoint(lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    (lab_env / "train.py").write_text(TRAIN)
    run = lab.submit({"name": "long", "command": ["python", str(lab_env / "train.py")]})
    wait_until(lab, run["id"], states={"Running"})
    poll(lambda: list((lab.runs_root / run["id"] / "checkpoints").glob("step-*")), "a first checkpoint")
    lab.stop(run["id"])
    assert wait_until(lab, run["id"])["status"] == "Stopped"
    return str(run["id"])


def test_a_stopped_run_resumes_from_its_latest_checkpoint_as_the_same_run(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = stopped_with_a_checkpoint(lab, lab_env, monkeypatch)
    saved = sorted(int(p.name.split("-")[1]) for p in (lab.runs_root / run_id / "checkpoints").glob("step-*"))
    resumed = lab.resume(run_id)
    assert resumed["id"] == run_id and resumed["status"] == "Queued"
    assert resumed["reason"] == f"resumed from step {saved[-1]}"
    (lab_env / "go").touch()
    final = wait_until(lab, run_id)
    assert final["status"] == "Succeeded", final
    states = [h["state"] for h in final["history"]]
    changes = [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]
    assert changes == ["Running", "Stopped", "Queued", "Running", "Succeeded"], states
    log = "".join(lab.logs(run_id))  # one log: the first start's lines kept
    assert "start 0 restart 0" in log and f"start {saved[-1]} restart 1" in log
    steps = [p["step"] for p in lab.metrics(run_id) if "step" in p and not p.get("final")]
    assert steps == sorted(set(steps)), "a step reported twice"
    assert steps[-1] > saved[-1]
    assert [r["id"] for r in lab.list("name:long")[0]] == [run_id]  # no second run


def test_only_a_stopped_run_is_resumed(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = lab.submit({"command": ["python", "-c", "pass"]})
    assert wait_until(lab, done["id"])["status"] == "Succeeded"
    with pytest.raises(Conflict) as caught:
        lab.resume(done["id"])
    assert caught.value.fields[0].path == "status" and "Succeeded" in caught.value.fields[0].reason
    assert lab.get(done["id"])["status"] == "Succeeded"  # unchanged
    with pytest.raises(NotFound):
        lab.resume("000000000000")

    run_id = stopped_with_a_checkpoint(lab, lab_env, monkeypatch)
    lab.resume(run_id)
    with pytest.raises(Conflict) as again:  # a second resume finds it queued or running
        lab.resume(run_id)
    assert "only a Stopped run can be resumed" in again.value.detail
    (lab_env / "go").touch()
    assert wait_until(lab, run_id)["status"] == "Succeeded"


def test_resume_from_the_cli(
    cli: Cli, lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = stopped_with_a_checkpoint(lab, lab_env, monkeypatch)
    said = cli("resume", run_id).stdout
    assert said.startswith(f"{run_id} Queued: resumed from step "), said
    refused = cli("resume", run_id, check_rc=None)
    assert refused.returncode != 0 and "only a Stopped run can be resumed" in refused.stderr
    (lab_env / "go").touch()
    assert wait_until(lab, run_id)["status"] == "Succeeded"
