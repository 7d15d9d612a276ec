"""Elastic runs that change size while they run: a higher-priority run takes one of an elastic
run's GPUs (it shrinks, not preempted whole), and gives it back (it grows); the trial resumes
from its checkpoint each time with the new WORLD_SIZE, each step reported once."""

from __future__ import annotations

import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import wait_until

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.experiments import Experiments
from kubelab.run_timeline import span_rows, timeline


def marks(ledger: GpuAllocator, *runs: str) -> dict[str, dict[str, Any]]:
    """The preemption marks on `runs`, without their times."""
    found = {run: ledger.preemption(run) for run in runs}
    return {run: {k: v for k, v in mark.items() if k != "since"} for run, mark in found.items() if mark}


def test_the_ledger_takes_an_elastic_runs_spare_replicas_before_the_whole_run(tmp_path: Path) -> None:
    ledger = GpuAllocator([Gpu(i, "T4") for i in range(3)], tmp_path)
    me = os.getpid()
    assert ledger.try_acquire("other", me, 1, priority=100, preemptible=True) == [0]
    held = ledger.try_acquire("elastic", me, 2, priority=100, preemptible=True, elastic=(1, 1))
    assert held == [1, 2]
    assert ledger.try_acquire("urgent", me, 1, priority=10000) is None
    # The newest low run holds spare replicas: its last replica's GPU goes, nothing else.
    assert marks(ledger, "other", "elastic") == {
        "elastic": {"by": "urgent", "priority": 10000, "gpus": ["2"]}
    }
    assert ledger.grow("elastic", [1], 1, None) == {}  # a run waits: no growing meanwhile
    ledger.give_up("elastic", ["2"])
    assert ledger.preemption("elastic") is None
    assert ledger.try_acquire("urgent", me, 1, priority=10000) == [2]
    assert ledger.try_acquire("elastic", me, 2) == [1]  # what it still holds
    ledger.release("urgent")
    ledger.release("other")
    assert ledger.grow("elastic", [1], 1, None) == {1: [0]}
    assert ledger.try_acquire("elastic", me, 2) == [0, 1]
    assert ledger.grow("elastic", [2], 1, None) == {2: [2]}
    assert ledger.grow("elastic", [3], 1, None) == {}  # nothing free


def test_an_elastic_run_at_its_minimum_is_preempted_whole(tmp_path: Path) -> None:
    ledger = GpuAllocator([Gpu(0, "T4"), Gpu(1, "T4")], tmp_path)
    me = os.getpid()
    assert ledger.try_acquire("elastic", me, 2, priority=100, preemptible=True, elastic=(2, 1)) == [0, 1]
    assert ledger.try_acquire("urgent", me, 1, priority=10000) is None
    assert marks(ledger, "elastic") == {"elastic": {"by": "urgent", "priority": 10000}}


TRAIN = textwrap.dedent(
    """
    import os, pathlib, time, torch, torch.distributed as dist, kubelab
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    found = kubelab.latest_checkpoint()
    start, weight = 0, torch.zeros(1)
    if found:
        start, weight = found[0], torch.load(found[1] / "w.pt")
    print(f"start {start} world {size} replica {os.environ['KUBELAB_REPLICA']}", flush=True)
    go = pathlib.Path(os.environ["GO_FILE"])
    step = start
    while True:
        step += 1
        both = torch.tensor([1.0, float(go.exists())])
        dist.all_reduce(both)  # every rank learns of the go at the same step
        weight += both[0] / size
        if rank == 0:
            kubelab.report(step=step, loss=1.0 / step, world=size, weight=weight.item())
            if step % 5 == 0:
                kubelab.save_checkpoint(step, lambda d: torch.save(weight, d / "w.pt"))
        if both[1] > 0 and size == 2 and step >= start + 3:
            break
        time.sleep(0.05)
    dist.destroy_process_group()
    """
)
HOLD = (
    "import os, pathlib, time\nwhile not pathlib.Path(os.environ['RELEASE_FILE']).exists(): time.sleep(0.05)"
)


def poll(predicate: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_elastic_run_shrinks_for_a_high_run_and_grows_back_from_its_checkpoints(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "2")
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    monkeypatch.setenv("RELEASE_FILE", str(lab_env / "release"))
    (lab_env / "train.py").write_text(TRAIN)
    record = lab.submit(
        {
            "name": "elastic",
            "command": ["python", str(lab_env / "train.py")],
            "replicas": {"min": 1, "max": 2},
            "framework": "pytorch",
            "resources": {"gpus": 1},
            "priority": "low",
            "preemption_grace": 10,
        }
    )
    run_id = record["id"]

    def worlds() -> list[int]:
        return [p["metrics"]["world"] for p in lab.metrics(run_id) if "step" in p]

    poll(lambda: worlds().count(2) >= 7, "steps at 2 replicas past a checkpoint")
    urgent = lab.submit(
        {
            "name": "urgent",
            "command": ["python", "-c", HOLD],
            "resources": {"gpus": 1},
            "priority": "high",
        }
    )
    taken = wait_until(lab, urgent["id"], states={"Running"}, timeout=60)
    shrunk = wait_until(lab, run_id, states={"Running"}, reason="shrunk to 1 of 2 replicas", timeout=60)
    assert f"for urgent ({urgent['id']}) (priority high); going on from step" in shrunk["reason"]
    assert shrunk["restarts"] == 1 and len(shrunk["gpu_ids"]) == 1  # never Preempted
    assert set(shrunk["gpu_ids"]) | set(taken["gpu_ids"]) == {0, 1}
    poll(lambda: worlds()[-1:] == [1] and worlds().count(1) >= 3, "steps at 1 replica")
    (lab_env / "release").touch()
    assert wait_until(lab, urgent["id"])["status"] == "Succeeded"
    grown = wait_until(lab, run_id, states={"Running"}, reason="grew to 2 of 2 replicas", timeout=60)
    assert grown["restarts"] == 2 and sorted(grown["gpu_ids"]) == [0, 1]
    poll(lambda: worlds()[-1:] == [2], "steps at 2 replicas again")
    (lab_env / "go").touch()
    final = wait_until(lab, run_id, timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(run_id))
    assert final["reason"] == "all 2 processes exited 0"

    points = [p for p in lab.metrics(run_id) if "step" in p]
    numbers = [p["step"] for p in points]
    assert numbers == list(range(1, numbers[-1] + 1)), "each step once, continuous"
    sizes = [p["metrics"]["world"] for p in points]
    phases = [size for index, size in enumerate(sizes) if index == 0 or sizes[index - 1] != size]
    assert phases == [2, 1, 2], sizes
    # The weight went on from each checkpoint: one per step, whatever the group's size.
    assert [p["metrics"]["weight"] for p in points] == [float(n) for n in numbers]
    log = "".join(lab.logs(run_id, replica=0)) + "".join(lab.logs(run_id, replica=1))
    starts = [int(line.split()[1]) for line in log.splitlines() if line.startswith("start ")]
    assert 0 in starts and any(s >= 5 and s % 5 == 0 for s in starts), starts  # resumed, not from 0
    assert "Preempted" not in [entry["state"] for entry in final["history"]]

    running = [span for span in final["timeline"] if span["state"] == "Running"]  # the REST record's
    assert [span["replicas"] for span in running] == [2, 1, 2]
    spans = [s for s in timeline(final["history"]) if s.state == "Running"]
    assert [s.replicas for s in spans] == [2, 1, 2]
    assert spans[1].reason.startswith("shrunk to 1 of 2 replicas for urgent")
    assert spans[2].reason.startswith("grew to 2 of 2 replicas: GPU ")
    rows = dict(span_rows(spans))
    assert {"Running x2", "Running x1"} <= set(rows), rows


def test_an_elastic_run_without_spare_replicas_is_preempted_whole_and_resumes(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    monkeypatch.setenv("RELEASE_FILE", str(lab_env / "release"))
    (lab_env / "train.py").write_text(TRAIN.replace("size == 2 and ", ""))
    record = lab.submit(
        {
            "command": ["python", str(lab_env / "train.py")],
            "replicas": "1:2",
            "framework": "pytorch",
            "resources": {"gpus": 1},
            "priority": "low",
        }
    )
    run_id = record["id"]
    poll(lambda: len([p for p in lab.metrics(run_id) if "step" in p]) >= 6, "steps past a checkpoint")
    urgent = {
        "name": "urgent",
        "command": ["python", "-c", HOLD],
        "resources": {"gpus": 1},
        "priority": "high",
    }
    taker = lab.submit(urgent)["id"]
    preempted = wait_until(lab, run_id, states={"Preempted"}, timeout=60)
    assert preempted["reason"].startswith(f"preempted for urgent ({taker}) (priority high)")
    (lab_env / "release").touch()
    (lab_env / "go").touch()
    final = wait_until(lab, run_id, timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(run_id))
    numbers = [p["step"] for p in lab.metrics(run_id) if "step" in p]
    assert numbers == list(range(1, numbers[-1] + 1))
