"""Elastic runs that change size while they run: a higher-priority run takes one of an elastic
run's GPUs (it shrinks, not preempted whole), and gives it back (it grows); the trial resumes
from its checkpoint each time with the new WORLD_SIZE, each step reported once. A planned shrink
spends none of the user's `max_restarts`, and workers that ignore SIGTERM are killed after the
grace period, the reason saying so."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest
from elastic_support import poll, start_elastic, steps, take_a_gpu, worlds
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


def test_an_elastic_run_shrinks_for_a_high_run_and_grows_back_from_its_checkpoints(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No restart of the user's: the shrink (a failure to torchrun) must not need one.
    elastic = {"min": 1, "max": 2, "max_restarts": 0}
    spec = {"elastic": elastic, "resources": {"gpus": 1}, "priority": "low", "preemption_grace": 10}
    run_id = start_elastic(lab, lab_env, monkeypatch, spec, gpus=2, finish_world=2)
    poll(lambda: worlds(lab, run_id).count(2) >= 7, "steps at 2 replicas past a checkpoint")
    urgent = take_a_gpu(lab)
    taken = wait_until(lab, urgent, states={"Running"}, timeout=60)
    shrunk = wait_until(lab, run_id, states={"Running"}, reason="shrunk to 1 of 2 replicas", timeout=60)
    assert f"for urgent ({urgent}) (priority high); going on from step" in shrunk["reason"]
    assert shrunk["restarts"] == 1 and len(shrunk["gpu_ids"]) == 1  # never Preempted
    assert set(shrunk["gpu_ids"]) | set(taken["gpu_ids"]) == {0, 1}
    poll(lambda: worlds(lab, run_id)[-1:] == [1] and worlds(lab, run_id).count(1) >= 3, "steps at 1 replica")
    (lab_env / "release").touch()
    assert wait_until(lab, urgent)["status"] == "Succeeded"
    grown = wait_until(lab, run_id, states={"Running"}, reason="grew to 2 of 2 replicas", timeout=60)
    assert grown["restarts"] == 2 and sorted(grown["gpu_ids"]) == [0, 1]
    poll(lambda: worlds(lab, run_id)[-1:] == [2], "steps at 2 replicas again")
    (lab_env / "go").touch()
    final = wait_until(lab, run_id, timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(run_id))
    assert final["reason"] == "all 2 processes exited 0"

    points = steps(lab, run_id)
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
    spec = {"replicas": "1:2", "resources": {"gpus": 1}, "priority": "low"}
    run_id = start_elastic(lab, lab_env, monkeypatch, spec, gpus=1)
    poll(lambda: len(steps(lab, run_id)) >= 6, "steps past a checkpoint")
    taker = take_a_gpu(lab)
    preempted = wait_until(lab, run_id, states={"Preempted"}, timeout=60)
    assert preempted["reason"].startswith(f"preempted for urgent ({taker}) (priority high)")
    (lab_env / "release").touch()
    (lab_env / "go").touch()
    final = wait_until(lab, run_id, timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(run_id))
    numbers = [p["step"] for p in steps(lab, run_id)]
    assert numbers == list(range(1, numbers[-1] + 1))


# Ignores SIGTERM and never talks to the other replica: nothing tells its old worker of a shrink.
DEAF = textwrap.dedent(
    """
    import os, signal, time, kubelab
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"started world {os.environ['WORLD_SIZE']}", flush=True)
    step = 0
    while True:
        step += 1
        if os.environ["KUBELAB_REPLICA"] == "0":
            kubelab.report(step=step, world=int(os.environ["WORLD_SIZE"]))
        time.sleep(0.1)
    """
)


def test_a_shrink_kills_workers_that_ignore_sigterm_after_the_grace_and_frees_their_gpus(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = {"replicas": "1:2", "resources": {"gpus": 1}, "priority": "low", "preemption_grace": 1}
    run_id = start_elastic(lab, lab_env, monkeypatch, spec, gpus=2, script=DEAF)
    poll(lambda: "started world 2" in "".join(lab.logs(run_id, replica=1)), "both replicas' workers")
    urgent = take_a_gpu(lab)
    assert wait_until(lab, urgent, states={"Running"}, timeout=60)  # the GPU came free
    shrunk = wait_until(lab, run_id, states={"Running"}, reason="shrunk to 1 of 2 replicas", timeout=60)
    assert "; replica 1 ignored SIGTERM; killed after 1 s" in shrunk["reason"], shrunk["reason"]
    # The staying replica's worker never learnt of the shrink: killed a grace period later, and
    # torchrun started it again in the group of one.
    assert "; replica 0's old worker had not ended 1 s after; killed" in shrunk["reason"]
    assert shrunk["status"] == "Running" and len(shrunk["gpu_ids"]) == 1
    poll(lambda: "started world 1" in "".join(lab.logs(run_id, replica=0)), "the group of one")
    lab.stop(run_id)
    (lab_env / "release").touch()
    assert wait_until(lab, urgent)["status"] == "Succeeded"
    assert wait_until(lab, run_id)["status"] == "Stopped"
