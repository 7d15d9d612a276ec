"""Helpers shared by the sweeps tests (importable by name, unlike conftest)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

from kubelab.sweeps.service import Sweeps


def wait_sweep(sweeps: Sweeps, sweep_id: str, timeout: float = 60.0, until=None) -> dict:
    """Poll until the sweep is no longer Running (or `until(record)` holds); fail with the record."""
    deadline = time.monotonic() + timeout
    record: dict = {}
    while time.monotonic() < deadline:
        record = sweeps.record(sweeps.sweep(sweep_id))
        if until(record) if until else record["status"] != "Running":
            return record
        time.sleep(0.05)
    log = sweeps.sweep(sweep_id).log_file
    raise AssertionError(f"sweep {sweep_id} timed out: {record}\n{log.read_text() if log.exists() else ''}")


def wait_driver_gone(sweeps: Sweeps, sweep_id: str, timeout: float = 30.0) -> None:
    sweep = sweeps.sweep(sweep_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not sweep.driver_alive() and sweep.read_state().driver_pid is not None:
            return
        time.sleep(0.02)
    raise AssertionError(f"the driver of {sweep_id} did not die: {sweep.read_state()}")


def trial_runs(home: Path, sweep_id: str) -> dict[int, list[str]]:
    """Trial number → every run directory recorded for it (more than one would be a rerun)."""
    found: dict[int, list[str]] = {}
    for path in (home / "runs").iterdir():
        status = json.loads((path / "status.json").read_text())
        if status.get("sweep") == sweep_id:
            found.setdefault(status["trial"], []).append(path.name)
    return found


def stop_leftovers(home: Path) -> None:
    """Kill drivers and runner process groups a failing test may leave behind."""
    for state_file in (home / "sweeps").glob("*/state.json"):
        pid = json.loads(state_file.read_text()).get("driver_pid")
        _kill(pid)
    for status_file in (home / "runs").glob("*/status.json"):
        status = json.loads(status_file.read_text())
        if status.get("state") in ("Pending", "Queued", "Running"):
            _kill(status.get("runner_pid"))
            for replica in status.get("replicas") or []:
                _kill(replica.get("pid"), group=True)


def _kill(pid: int | None, group: bool = False) -> None:
    if not pid:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
