"""Warm helpers: pre-started runners that local submits are handed to (and reuse), and warm
sweep drivers that a server keeps."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

import pytest
from jupyter_server_process import JupyterServer
from kubelab_testing import wait_until
from leftover_processes import assert_none_left

from kubelab.experiments import Experiments
from kubelab.pids import pid_alive
from kubelab.records import RunDirectory
from kubelab.warm import DRIVER, RUNNER, WarmPool, idle_pid, main, pool_size

T = TypeVar("T")


def wait_for(condition: Callable[[], T | None | Literal[False]], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def gone(pid: int) -> bool:
    return not pid_alive(pid)


def kill(pids: Iterable[int]) -> None:
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pool(lab: Experiments) -> Iterator[WarmPool]:
    runners = WarmPool(lab.home)
    yield runners
    kill(runners.idle())


def warm(pool: WarmPool, count: int) -> list[int]:
    pool.top_up()
    return wait_for(lambda: len(pool.idle()) >= count and pool.idle())


def runner_pid(lab: Experiments, run_id: str) -> int | None:
    return RunDirectory(lab.runs_root / run_id).status().runner_pid


def test_submit_is_served_by_a_warm_runner_with_the_submitters_env(
    lab: Experiments, pool: WarmPool, monkeypatch: pytest.MonkeyPatch, lab_env: Path
) -> None:
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


def test_a_dead_idle_runner_is_skipped(lab: Experiments, pool: WarmPool) -> None:
    first, second = warm(pool, 2)[:2]  # oldest (lowest pid) first, the order claims try
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not pid_alive(first))
    record = lab.submit({"command": "true"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert runner_pid(lab, record["id"]) == second
    assert not (pool.path / f"idle-{first}.fifo").exists()
    assert not (pool.path / f"claimed-{first}.fifo").exists()


def test_no_idle_runner_means_a_cold_start_then_a_top_up(lab: Experiments, pool: WarmPool) -> None:
    assert pool.idle() == [] and pool.hand_over(lab.runs_root / "nothing") is None
    record = lab.submit({"command": "true"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    cold = runner_pid(lab, record["id"])
    assert cold is not None
    topped_up = wait_for(lambda: len(pool.idle()) >= 2 and pool.idle())
    assert cold not in topped_up


def test_idle_runner_exits_after_its_timeout(lab: Experiments, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_WARM_RUNNER_IDLE", "0.5")
    runners = WarmPool(lab.home)
    (pid,) = warm(runners, 1)[:1]
    wait_for(lambda: not pid_alive(pid), timeout=15)
    assert not any(name.endswith(f"-{pid}.fifo") for name in os.listdir(runners.path))


def test_an_idle_runner_exits_when_its_pool_folder_is_removed(lab: Experiments) -> None:
    runners = WarmPool(lab.home)
    (pid,) = warm(runners, 1)[:1]
    for name in os.listdir(runners.path):
        os.unlink(runners.path / name)
    wait_for(lambda: not pid_alive(pid), timeout=15)


def test_two_concurrent_submitters_never_claim_one_runner(lab: Experiments, pool: WarmPool) -> None:
    idle = warm(pool, 2)
    target = lab.runs_root / "claim-target"
    (target / "logs").mkdir(parents=True)
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
        wait_for(partial(gone, pid))


def test_a_claim_for_a_missing_directory_starts_nothing_and_keeps_the_runner(
    lab: Experiments, pool: WarmPool
) -> None:
    first = warm(pool, 2)[0]
    assert pool.hand_over(lab.runs_root / "gone") == first
    assert wait_for(lambda: first in pool.idle())  # idle again, under the same pid
    assert not (lab.runs_root / "gone").exists()


def test_the_off_switch(lab: Experiments, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "0")
    assert pool_size() == 0
    record = lab.submit({"command": "true"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert not (lab.home / "warm").exists()
    lab.backend.warm_up(lab.home)
    assert not (lab.home / "warm").exists()


def test_settings_are_read_leniently_and_names_parsed_strictly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "lots")
    monkeypatch.setenv("KUBELAB_WARM_DRIVER_IDLE", "soon")
    assert pool_size() == 2 and DRIVER.idle_timeout() == 600.0
    assert idle_pid("idle-123.fifo") == 123
    assert idle_pid("idle-x.fifo") is None and idle_pid("claimed-5.fifo") is None


def test_a_runner_serves_run_after_run_and_goes_back_to_idle(lab: Experiments, pool: WarmPool) -> None:
    idle = warm(pool, 2)
    pids = []
    for word in ("first", "second", "third"):
        record = lab.submit({"command": f"echo {word}"})
        assert wait_until(lab, record["id"])["status"] == "Succeeded"
        assert "".join(lab.logs(record["id"])).strip() == word
        pids.append(runner_pid(lab, record["id"]))
    assert pids[0] in idle
    assert len(set(pids)) < 3  # the same processes again, not one per run
    assert all(pid_alive(pid) for pid in pids)


def test_a_stop_reaches_a_warm_runners_run_through_the_stop_file(lab: Experiments, pool: WarmPool) -> None:
    warm(pool, 2)
    record = lab.submit({"command": "sleep 30"})
    wait_for(lambda: lab.get(record["id"])["status"] == "Running")
    runner = runner_pid(lab, record["id"])
    lab.stop(record["id"])
    final = wait_until(lab, record["id"])
    assert final["status"] == "Stopped" and final["reason"] == "stopped by user"
    assert wait_for(lambda: runner in pool.idle())  # a stop ends the run, not its runner


def test_a_signalled_runner_ends_its_run_and_is_not_reused(lab: Experiments, pool: WarmPool) -> None:
    warm(pool, 2)
    record = lab.submit({"command": "sleep 30"})
    wait_for(lambda: lab.get(record["id"])["status"] == "Running")
    runner = runner_pid(lab, record["id"])
    assert runner is not None
    os.kill(runner, signal.SIGTERM)  # someone told the process itself to go away
    assert wait_until(lab, record["id"])["status"] == "Stopped"
    wait_for(lambda: not pid_alive(runner))
    assert runner not in pool.idle()


def test_a_runner_that_cannot_read_its_run_exits_and_says_why(lab: Experiments, pool: WarmPool) -> None:
    first = warm(pool, 2)[0]
    broken = lab.runs_root / "broken"
    (broken / "logs").mkdir(parents=True)
    assert pool.hand_over(broken) == first
    wait_for(lambda: not pid_alive(first))
    assert "cannot run" in (broken / "logs" / "runner.log").read_text()


def test_a_warm_driver_takes_a_sweep_and_is_replaced(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubelab.sweeps.service import Sweeps
    from kubelab.sweeps.watcher import SweepWatcher

    monkeypatch.setenv("KUBELAB_WARM_DRIVERS", "1")  # the default; tests turn it off elsewhere

    drivers = WarmPool(lab.home, DRIVER)
    watcher = SweepWatcher(lab, liveness=0.0)
    watcher.start()  # what a server does: a warm driver, warm runners
    try:
        (driver,) = wait_for(lambda: drivers.idle())
        wait_for(lambda: len(WarmPool(lab.home, RUNNER).idle()) >= 2)
        sweeps = Sweeps(lab)
        trial = "import kubelab; kubelab.report(loss=kubelab.params()['x'])"
        record = sweeps.create(
            {
                "space": {"x": {"_type": "choice", "_value": [1, 2]}},
                "tuner": "grid",
                "objective": {"metric": "loss"},
                "trial": {"command": ["python", "-c", trial]},
            },
            base_dir=lab_env,
        )
        assert driver not in drivers.idle()  # claimed by the create itself
        sweep = sweeps.sweep(record["id"])
        wait_for(lambda: sweeps.record(sweep)["status"] != "Running")
        assert sweeps.record(sweep)["status"] == "Succeeded"
        assert driver not in drivers.idle()
        watcher.poll()  # the server's next look after `liveness` (5 s) replaces it
        replacement = wait_for(lambda: drivers.idle())
        assert driver not in replacement
        wait_for(lambda: not pid_alive(driver))  # a driver serves one sweep
    finally:
        kill(drivers.idle())


def test_without_a_server_no_driver_is_kept_warm(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubelab.sweeps.service import Sweeps

    monkeypatch.setenv("KUBELAB_WARM_DRIVERS", "1")

    sweeps = Sweeps(lab)
    record = sweeps.create(
        {
            "space": {"x": {"_type": "choice", "_value": [1]}},
            "tuner": "grid",
            "objective": {"metric": "loss"},
            "trial": {"command": ["python", "-c", "import kubelab; kubelab.report(loss=1)"]},
        },
        base_dir=lab_env,
    )
    wait_for(lambda: sweeps.record(sweeps.sweep(record["id"]))["status"] != "Running")
    assert sweeps.record(sweeps.sweep(record["id"]))["status"] == "Succeeded"
    assert WarmPool(lab.home, DRIVER).idle() == []


def test_the_helper_command_names_its_roles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bogus:/tmp/x"]) == 2 and main(["runner"]) == 2 and main([]) == 2
    assert main(["driver@me:/tmp/x"]) == 2
    assert "ROLE: runner or driver" in capsys.readouterr().err


def test_an_idle_driver_leaves_with_its_keeper(lab: Experiments, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    monkeypatch.setenv("KUBELAB_WARM_DRIVERS", "1")
    monkeypatch.setenv("KUBELAB_WARM_DRIVER_IDLE", "60")
    keeper = subprocess.Popen(["sleep", "60"])  # stands in for the server that keeps it warm
    drivers = WarmPool(lab.home, DRIVER)
    try:
        drivers.top_up(keeper=keeper.pid)
        (driver,) = wait_for(lambda: drivers.idle())
        keeper.kill()
        keeper.wait()
        wait_for(lambda: not pid_alive(driver), timeout=15)  # long before its idle timeout
        assert drivers.idle() == []
    finally:
        keeper.kill()
        kill(drivers.idle())


def test_a_killed_server_leaves_no_idle_helper_behind(lab_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runners and the driver a server keeps warm name it their keeper: a SIGKILL of the
    server (no shutdown code runs) ends them, long before their idle timeouts."""
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "2")
    monkeypatch.setenv("KUBELAB_WARM_DRIVERS", "1")
    monkeypatch.setenv("KUBELAB_WARM_RUNNER_IDLE", "600")
    monkeypatch.setenv("KUBELAB_WARM_DRIVER_IDLE", "600")
    home = lab_env / "home"
    runners, drivers = WarmPool(home), WarmPool(home, DRIVER)
    with JupyterServer(lab_env / "root", home) as server:
        helpers = wait_for(lambda: len(runners.idle()) == 2 and len(drivers.idle()) == 1 and runners.idle())
        helpers += drivers.idle()
        assert server.process is not None
        server.process.kill()
        server.process.wait()
        try:
            wait_for(lambda: not any(map(pid_alive, helpers)), timeout=30)
        finally:
            kill(helpers)
    assert_none_left(lab_env)
