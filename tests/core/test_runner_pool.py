"""Warm runners: pre-started runner processes that local submits are handed to."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from kubelab_testing import wait_until

from kubelab.gpus import pid_alive
from kubelab.lab import Lab
from kubelab.records import RunDirectory
from kubelab.runner_pool import RunnerPool, idle_pid, pool_size


def wait_for(condition, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def kill(pids) -> None:
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pool(lab):
    runners = RunnerPool(lab.home)
    yield runners
    kill(runners.idle())


def warm(pool: RunnerPool, count: int) -> list[int]:
    pool.top_up()
    return wait_for(lambda: len(pool.idle()) >= count and pool.idle())


def runner_pid(lab: Lab, run_id: str) -> int | None:
    return RunDirectory(lab.runs_root / run_id).status().runner_pid


def test_submit_is_served_by_a_warm_runner_with_the_submitters_env(lab, pool, monkeypatch, lab_env):
    idle = warm(pool, 2)
    monkeypatch.setenv("POOL_TEST_VALUE", "from-the-submitter")
    (lab_env / "sub").mkdir()
    monkeypatch.chdir(lab_env / "sub")
    record = lab.submit({"command": "echo $POOL_TEST_VALUE; pwd"})
    final = wait_until(lab, record["id"])
    assert final["status"] == "Succeeded", final
    assert runner_pid(lab, record["id"]) in idle  # the pre-started process, not a new one
    log = "".join(lab.logs(record["id"]))
    assert log.split() == ["from-the-submitter", str(lab_env / "sub")]
    # The backend topped the pool up again, without waiting for it.
    wait_for(lambda: len(pool.idle()) >= 2)


def test_a_dead_idle_runner_is_skipped(lab, pool):
    first, second = warm(pool, 2)[:2]  # oldest (lowest pid) first, the order claims try
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not pid_alive(first))
    record = lab.submit({"command": "true"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert runner_pid(lab, record["id"]) == second
    assert not (pool.path / f"idle-{first}.fifo").exists()
    assert not (pool.path / f"claimed-{first}.fifo").exists()


def test_no_idle_runner_means_a_cold_start_then_a_top_up(lab, pool):
    assert pool.idle() == [] and pool.hand_over(lab.runs_root / "nothing") is None
    record = lab.submit({"command": "true"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    cold = runner_pid(lab, record["id"])
    assert cold is not None
    topped_up = wait_for(lambda: len(pool.idle()) >= 2 and pool.idle())
    assert cold not in topped_up


def test_idle_runner_exits_after_its_timeout(lab, monkeypatch):
    monkeypatch.setenv("KUBELAB_WARM_RUNNER_IDLE", "0.5")
    runners = RunnerPool(lab.home)
    (pid,) = warm(runners, 1)[:1]
    wait_for(lambda: not pid_alive(pid), timeout=15)
    assert not any(name.endswith(f"-{pid}.fifo") for name in os.listdir(runners.path))


def test_an_idle_runner_exits_when_its_pool_folder_is_removed(lab):
    runners = RunnerPool(lab.home)
    (pid,) = warm(runners, 1)[:1]
    for name in os.listdir(runners.path):
        os.unlink(runners.path / name)
    wait_for(lambda: not pid_alive(pid), timeout=15)


def test_two_concurrent_submitters_never_claim_one_runner(lab, pool):
    idle = warm(pool, 2)
    target = lab.runs_root / "claim-target"
    target.mkdir()
    won: list[int | None] = []
    barrier = threading.Barrier(6)

    def claim() -> None:
        barrier.wait()
        won.append(pool.hand_over(target))

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [pid for pid in won if pid is not None]
    assert sorted(winners) == sorted(idle)  # each idle runner claimed exactly once
    assert won.count(None) == 4
    # The claimed runners received a run that is no run: they fail to serve it and exit.
    for pid in winners:
        wait_for(lambda pid=pid: not pid_alive(pid))


def test_the_off_switch(lab, monkeypatch):
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "0")
    assert pool_size() == 0
    record = lab.submit({"command": "true"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert not (lab.home / "runners").exists()
    lab.backend.warm_up(lab.home)
    assert not (lab.home / "runners").exists()


def test_settings_are_read_leniently_and_names_parsed_strictly(monkeypatch):
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "lots")
    assert pool_size() == 2
    assert idle_pid("idle-123.fifo") == 123
    assert idle_pid("idle-x.fifo") is None and idle_pid("claimed-5.fifo") is None
