"""Helpers for the suites of kubelab's detached drivers (sweeps, pipelines): waiting on a
driver's record or its death, finding the runs it started, and killing what a failing test
left behind. `sweeps/sweep_support.py` and `pipelines/pipeline_support.py` name them for
their own kind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def wait_record(
    record: Callable[[Any], dict[str, Any]],
    directory: Any,
    kind: str,
    timeout: float,
    until: Callable[[dict[str, Any]], bool] | None,
) -> dict[str, Any]:
    """Poll `record(directory)` until it is no longer Running (or `until(record)` holds); fail
    with the record and the driver's log."""
    deadline = time.monotonic() + timeout
    current: dict[str, Any] = {}
    while time.monotonic() < deadline:
        current = record(directory)
        if until(current) if until else current["status"] != "Running":
            return current
        time.sleep(0.05)
    log = directory.log_file
    raise AssertionError(
        f"{kind} {directory.id} timed out: {current}\n{log.read_text() if log.exists() else ''}"
    )


def wait_driver_gone(directory: Any, timeout: float) -> None:
    """Wait until the driver that took `directory` (a sweep's or pipeline's) has died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not directory.driver_alive() and directory.read_state().driver_pid is not None:
            return
        time.sleep(0.02)
    raise AssertionError(f"the driver of {directory.id} did not die: {directory.read_state()}")


def group_runs(home: Path, key: str, where: Callable[[dict[str, Any]], bool]) -> dict[Any, list[str]]:
    """The run directories whose status passes `where`, by the status's `key`, in name order."""
    found: dict[Any, list[str]] = {}
    for path in sorted((home / "runs").iterdir()):
        status = json.loads((path / "status.json").read_text())
        if where(status):
            found.setdefault(status[key], []).append(path.name)
    return found


def stop_leftovers(home: Path) -> None:
    """Kill the pipeline and sweep drivers, the scheduler and the runners (with their
    replicas' process groups) that a failing test may leave in `home`."""
    for state_file in [*(home / "pipelines").glob("*/state.json"), *(home / "sweeps").glob("*/state.json")]:
        _kill(json.loads(state_file.read_text()).get("driver_pid"))
    pid_file = home / "schedules" / "scheduler.pid"
    if pid_file.exists():
        _kill(int(pid_file.read_text() or 0))
    for status_file in (home / "runs").glob("*/status.json"):
        status = json.loads(status_file.read_text())
        if status.get("state") in ("Pending", "Queued", "Building", "Running"):
            _kill(status.get("runner_pid"))
            for replica in status.get("replicas") or []:
                _kill(replica.get("pid"), group=True)


def _kill(pid: int | None, group: bool = False) -> None:
    if not pid:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
