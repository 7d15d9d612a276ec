"""Helpers shared by the pipeline tests (importable by name, unlike conftest)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import textwrap
import time
from pathlib import Path

from kubelab.pipelines.service import Pipelines


def wait_pipeline(pipelines: Pipelines, pipeline_id: str, timeout: float = 90.0, until=None) -> dict:
    """Poll until the pipeline is no longer Running (or `until(record)` holds); fail with the record."""
    deadline = time.monotonic() + timeout
    record: dict = {}
    while time.monotonic() < deadline:
        record = pipelines.record(pipelines.pipeline(pipeline_id))
        if until(record) if until else record["status"] != "Running":
            return record
        time.sleep(0.05)
    log = pipelines.pipeline(pipeline_id).log_file
    raise AssertionError(
        f"pipeline {pipeline_id} timed out: {record}\n{log.read_text() if log.exists() else ''}"
    )


def wait_driver_gone(pipelines: Pipelines, pipeline_id: str, timeout: float = 60.0) -> None:
    pipeline = pipelines.pipeline(pipeline_id)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pipeline.driver_alive() and pipeline.read_state().driver_pid is not None:
            return
        time.sleep(0.02)
    raise AssertionError(f"the driver of {pipeline_id} did not die: {pipeline.read_state()}")


def step_runs(home: Path, pipeline_id: str) -> dict[str, list[str]]:
    """Step name → every experiment run directory started for it (sweep trials excluded)."""
    found: dict[str, list[str]] = {}
    for path in sorted((home / "runs").iterdir()):
        status = json.loads((path / "status.json").read_text())
        if status.get("pipeline") == pipeline_id and status.get("sweep") is None:
            found.setdefault(status["pipeline_step"], []).append(path.name)
    return found


def step_sweeps(home: Path, pipeline_id: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((home / "sweeps").glob("*/state.json")):
        state = json.loads(path.read_text())
        if state.get("pipeline") == pipeline_id:
            found.setdefault(state["pipeline_step"], []).append(path.parent.name)
    return found


def write_script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def stop_pipeline_leftovers(home: Path) -> None:
    """Kill pipeline and sweep drivers, the scheduler and runners a failing test may leave."""
    for state_file in [*(home / "pipelines").glob("*/state.json"), *(home / "sweeps").glob("*/state.json")]:
        _kill(json.loads(state_file.read_text()).get("driver_pid"))
    pid_file = home / "schedules" / "scheduler.pid"
    if pid_file.exists():
        _kill(int(pid_file.read_text() or 0))
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
