"""Priorities and preemption on the local backend: a high run takes a low run's GPU, the low
run saves a checkpoint, waits as Preempted, and resumes from it with its metrics continuous."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import wait_until

from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.run_timeline import timeline


def poll(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


TRAIN = textwrap.dedent(
    """
    import json, os, pathlib, sys, time, kubelab
    found = kubelab.latest_checkpoint()
    start = found[0] if found else 0
    print("start", start, "restart", kubelab.restart_count(), flush=True)
    go = pathlib.Path(os.environ["GO_FILE"])
    step = start
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        step += 1
        kubelab.report(step=step, loss=1.0 / step)
        if kubelab.preempted():
            kubelab.save_checkpoint(step, lambda d: (d / "s").write_text(str(step)))
            sys.exit(0)
        if step % 5 == 0:
            kubelab.save_checkpoint(step, lambda d: (d / "s").write_text(str(step)))
        if go.exists() and step >= start + 3:
            break
        time.sleep(0.02)
    """
)


def test_a_high_priority_run_preempts_a_low_one_which_resumes_from_its_checkpoint(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    (lab_env / "train.py").write_text(TRAIN)
    low = lab.submit(
        {
            "name": "long",
            "command": ["python", str(lab_env / "train.py")],
            "resources": {"gpus": 1},
            "priority": "low",
            "preemption_grace": 20,
        }
    )
    run_dir = lab.runs_root / low["id"]
    wait_until(lab, low["id"], states={"Running"})
    poll(lambda: list((run_dir / "checkpoints").glob("step-*")), "the low run's first checkpoint")
    high = lab.submit(
        {
            "name": "deadline",
            "command": ["python", "-c", "print('urgent')"],
            "resources": {"gpus": 1},
            "priority": "high",
        }
    )
    preempted = wait_until(lab, low["id"], states={"Preempted"})
    assert preempted["reason"].startswith(f"preempted for deadline ({high['id']}) (priority high)"), preempted
    assert wait_until(lab, high["id"])["status"] == "Succeeded"
    (lab_env / "go").touch()
    final = wait_until(lab, low["id"])
    assert final["status"] == "Succeeded", final
    states = [h["state"] for h in final["history"]]
    changes = [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s]
    assert changes == ["Running", "Preempted", "Running", "Succeeded"], states
    assert [span.resumed for span in timeline(final["history"])] == [
        False,
        False,
        True,
        False,
    ]  # kubelab show
    log = "".join(lab.logs(low["id"]))
    assert "start 0 restart 0" in log and "restart 1" in log
    resumed_from = int(log.split("restart 1")[0].rsplit("start ", 1)[1].split()[0])
    assert resumed_from > 0  # not from scratch
    steps = [p["step"] for p in lab.metrics(low["id"]) if "step" in p and not p.get("final")]
    assert steps == sorted(set(steps)), "a step reported twice"  # continuous, no duplicates
    assert json.loads((run_dir / "status.json").read_text())["restarts"] == 1


def test_a_normal_run_is_not_preempted_and_the_high_run_waits(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    (lab_env / "train.py").write_text(TRAIN)
    normal = lab.submit({"command": ["python", str(lab_env / "train.py")], "resources": {"gpus": 1}})
    wait_until(lab, normal["id"], states={"Running"})
    high = lab.submit({"command": ["python", "-c", "pass"], "resources": {"gpus": 1}, "priority": "high"})
    assert wait_until(lab, high["id"], states={"Queued"})["status"] == "Queued"
    (lab_env / "go").touch()
    assert wait_until(lab, normal["id"])["history"][-1]["state"] == "Succeeded"
    assert "Preempted" not in [h["state"] for h in lab.get(normal["id"])["history"]]
    assert wait_until(lab, high["id"])["status"] == "Succeeded"


@pytest.mark.parametrize(
    ("spec", "path", "reason"),
    [
        ({"priority": "urgent"}, "priority", "low, normal, high or a whole number"),
        ({"priority": -1}, "priority", "between 0 and"),
        ({"preemptible": "yes"}, "preemptible", "true or false"),
    ],
)
def test_bad_priorities_are_refused_by_field(
    lab: Experiments, spec: dict[str, Any], path: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", **spec})
    assert any(f.path == path and reason in f.reason for f in caught.value.fields)
    assert lab.list()[0] == []
