"""Helpers shared by the pipeline tests (importable by name, unlike conftest): the drivers'
helpers of `driver_support`, named for pipelines, and what only pipelines have (steps)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import driver_support

from kubelab.pipelines.service import Pipelines


def wait_pipeline(
    pipelines: Pipelines,
    pipeline_id: str,
    timeout: float = 90.0,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """Poll until the pipeline is no longer Running (or `until(record)` holds); fail with the record."""
    return driver_support.wait_record(
        pipelines.record, pipelines.pipeline(pipeline_id), "pipeline", timeout, until
    )


def wait_driver_gone(pipelines: Pipelines, pipeline_id: str, timeout: float = 60.0) -> None:
    driver_support.wait_driver_gone(pipelines.pipeline(pipeline_id), timeout)


def step_runs(home: Path, pipeline_id: str) -> dict[str, list[str]]:
    """Step name → every experiment run directory started for it (sweep trials excluded)."""
    return driver_support.group_runs(
        home,
        "pipeline_step",
        lambda status: status.get("pipeline") == pipeline_id and status.get("sweep") is None,
    )


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
