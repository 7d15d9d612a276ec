"""A run whose folder is deleted while it runs (a removed test folder or home, `rm -rf`)
ends: its runner, cold or warm, stops the run's processes and leaves, instead of watching
a run nobody can see or stop any more."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

import pytest
from kubelab_testing import wait_until

from kubelab.experiments import Experiments
from kubelab.pids import pid_alive
from kubelab.records import RunDirectory
from kubelab.warm import WarmPool


def poll(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


@pytest.mark.parametrize("warm", [False, True], ids=["cold runner", "warm runner"])
def test_a_run_whose_folder_is_deleted_stops_and_its_runner_leaves(
    lab: Experiments, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "1" if warm else "0")
    monkeypatch.setenv("KUBELAB_WARM_RUNNER_IDLE", "600")  # only the deletion can end it
    pool = WarmPool(lab.home)
    if warm:
        pool.top_up()
        poll(lambda: len(pool.idle()) == 1)
    helper = next(iter(pool.idle()), None)
    record = lab.submit({"command": ["sleep", "600"]})
    running = wait_until(lab, record["id"], states=("Running",))
    runner = RunDirectory(lab.runs_root / record["id"]).status().runner_pid
    replica = running["replica_status"][0]["pid"]
    assert pid_alive(runner) and pid_alive(replica)
    assert runner == helper if warm else runner != helper

    shutil.rmtree(lab.runs_root / record["id"])

    poll(lambda: not pid_alive(replica) and not pid_alive(runner))
