"""PBT on the driver's side: where a trial's latest checkpoint is, and what a member's trial is
told before it starts (its generation, the step it goes on from, its parent's checkpoint).

A lineage names runs and steps, never paths: the folders are found under the runs root of
whoever submits, which both backends keep where it writes (this machine's disk, the user's
workspace claim). Needs no Optuna, so the driver imports it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kubelab.checkpoints import saved_checkpoints, step_folder
from kubelab.records import RunDirectory
from kubelab.sweeps.population import Settings, member_env

if TYPE_CHECKING:
    from kubelab.spec import ExperimentSpec
    from kubelab.sweeps.driver import Driver
    from kubelab.sweeps.store import TrialEntry

Locate = Callable[[int], "tuple[int, str] | None"]  # trial number -> (checkpoint step, run id)


def checkpoints_of(driver: Driver) -> Locate:
    """A trial's latest checkpoint (step, run id), from the driver's ledger and the run's folder."""

    def locate(number: int) -> tuple[int, str] | None:
        entry = driver.state.entry(number)
        if entry is None or entry.run_id is None:
            return None
        folder = RunDirectory(driver.lab.runs_root / entry.run_id).checkpoints_dir
        saved = saved_checkpoints(folder) if folder.is_dir() else []
        return (saved[-1][0], entry.run_id) if saved else None

    return locate


def member_start(driver: Driver, entry: TrialEntry, spec: ExperimentSpec) -> Path | None:
    """For a PBT member: its variables in `spec.env`, and the checkpoint folder it copies
    (None for the first generation and for every trial of other tuners)."""
    lineage = entry.lineage
    if not lineage:
        return None
    spec.env.update(member_env(lineage, Settings.of(driver.spec.tuner.kwargs)))
    if lineage.get("from_run") is None:
        return None
    parent = RunDirectory(driver.lab.runs_root / lineage["from_run"])
    return step_folder(parent.checkpoints_dir, int(lineage["start_step"]))
