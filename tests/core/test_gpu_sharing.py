"""Sharing a GPU on this machine: `resources.gpus: 1/n` runs side by side on one GPU."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubelab_testing import wait_until

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments

T = TypeVar("T")

HOLD = """
import json, os, pathlib, time
out = pathlib.Path(os.environ["KUBELAB_RUN_DIR"]) / "outputs" / "env.json"
out.write_text(json.dumps({k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "KUBELAB_GPU_FRACTION")}))
go = pathlib.Path(os.environ["GO_FILE"])
deadline = time.monotonic() + 60
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def _poll(predicate: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_half_gpu_runs_share_one_gpu_and_a_third_waits_for_room(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    (lab_env / "hold.py").write_text(HOLD)
    half = {"command": ["python", str(lab_env / "hold.py")], "resources": {"gpus": 0.5}}
    first, second = lab.submit(dict(half, name="a")), lab.submit(dict(half, name="b"))
    envs = [lab.runs_root / r["id"] / "outputs" / "env.json" for r in (first, second)]
    _poll(lambda: all(p.exists() for p in envs), "both shares to start")
    for path in envs:
        assert json.loads(path.read_text()) == {"CUDA_VISIBLE_DEVICES": "0", "KUBELAB_GPU_FRACTION": "0.5"}
    third = lab.submit(dict(half, name="c"))
    whole = lab.submit({"command": ["python", "-c", "pass"], "resources": {"gpus": 1}, "name": "whole"})
    queued = wait_until(lab, third["id"], states={"Queued"})
    assert queued["reason"].startswith("waiting for 0.5 GPU(s)"), queued
    assert wait_until(lab, whole["id"], states={"Queued"})["status"] == "Queued"
    (lab_env / "go").touch()
    for record in (first, second, third, whole):
        assert wait_until(lab, record["id"])["status"] == "Succeeded"


def test_the_ledger_packs_shares_and_keeps_whole_gpus_for_whole_requests(tmp_path: Path) -> None:
    ledger = GpuAllocator([Gpu(0, "T4"), Gpu(1, "T4")], directory=tmp_path)
    me = __import__("os").getpid()
    first = ledger.try_acquire("a", me, 0.5)
    assert ledger.try_acquire("b", me, 0.25) == first  # packed beside a, not on the free GPU
    assert ledger.try_acquire("c", me, 1) == [g for g in (0, 1) if [g] != first]  # the other GPU
    assert ledger.try_acquire("d", me, 0.5) is None  # 0.75 used and the other GPU is whole-held
    ledger.release("a")
    assert ledger.try_acquire("d", me, 0.5) == first
    snapshot = ledger.snapshot()
    shared = next(d for d in snapshot["devices"] if [d["index"]] == first)
    assert sorted(s["run"] for s in shared["shares"]) == ["b", "d"]
    assert snapshot["free"] == 0


@pytest.mark.parametrize(
    ("gpus", "reason"),
    [
        (0.3, "1/n of one GPU to share it"),
        ("half", "1/n of one GPU to share it"),
        (1.5, "1/n of one GPU to share it"),
        (-0.5, "0 or more"),
    ],
)
def test_a_share_that_is_not_one_nth_is_refused_naming_the_field(
    lab: Experiments, gpus: str | float, reason: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", "resources": {"gpus": gpus}})
    [problem] = caught.value.fields
    assert problem.path == "resources.gpus" and reason in problem.reason
    assert lab.list()[0] == []  # nothing was created


def test_gpu_indices_pick_the_machines_gpus_and_a_missing_one_is_refused(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "3")
    show = "import os; print('visible', os.environ['CUDA_VISIBLE_DEVICES'])"
    record = lab.submit({"command": ["python", "-c", show], "resources": {"gpus": 1, "gpu_indices": [2]}})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert "visible 2" in "".join(lab.logs(record["id"]))
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", "resources": {"gpus": 1, "gpu_indices": [0, 5]}})
    [problem] = caught.value.fields
    assert (
        problem.path == "resources.gpu_indices" and problem.reason == "this machine has GPUs 0, 1, 2, not 5"
    )
    assert [r["id"] for r in lab.list()[0]] == [record["id"]]  # nothing else was created


@pytest.mark.parametrize(
    ("sweep", "path", "reason"),
    [
        (
            {"trials_per_gpu": 2, "trial": {"command": "x", "resources": {"gpus": 2}}},
            "trials_per_gpu",
            "must be 1",
        ),
        ({"trials_per_gpu": 0, "trial": {"command": "x"}}, "trials_per_gpu", "at least 1"),
        ({"trials_per_gpu": 65, "trial": {"command": "x"}}, "trials_per_gpu", "at most 64"),
    ],
)
def test_trials_per_gpu_is_checked_by_field(sweep: dict[str, Any], path: str, reason: str) -> None:
    from kubelab.sweeps.sweep_spec import SweepSpec

    data = {"space": {"x": {"type": "uniform", "low": 0, "high": 1}}, "max_trials": 2, **sweep}
    with pytest.raises(ValidationError) as caught:
        SweepSpec.parse(data)
    assert any(f.path == path and reason in f.reason for f in caught.value.fields), caught.value.message()
