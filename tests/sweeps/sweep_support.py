"""Helpers shared by the sweeps tests (importable by name, unlike conftest): the drivers'
helpers of `driver_support`, named for sweeps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import driver_support

from kubelab.sweeps.service import Sweeps


def wait_sweep(
    sweeps: Sweeps,
    sweep_id: str,
    timeout: float = 60.0,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    """Poll until the sweep is no longer Running (or `until(record)` holds); fail with the record."""
    return driver_support.wait_record(sweeps.record, sweeps.sweep(sweep_id), "sweep", timeout, until)


def wait_driver_gone(sweeps: Sweeps, sweep_id: str, timeout: float = 30.0) -> None:
    driver_support.wait_driver_gone(sweeps.sweep(sweep_id), timeout)


def trial_runs(home: Path, sweep_id: str) -> dict[int, list[str]]:
    """Trial number → every run directory recorded for it (more than one would be a rerun)."""
    return driver_support.group_runs(home, "trial", lambda status: status.get("sweep") == sweep_id)
