"""Sweeps as a service: what the CLI, the REST handlers and the magics call.

`Sweeps(lab)` creates a sweep (validate everything, write its folder, start its driver),
lists and shows sweeps with their trials, best trial and parameter importance, stops,
resumes and extends them. Whoever looks at a Running sweep whose driver is dead starts a
new driver, so a sweep carries on after a crash or a reboot without anyone asking.
"""

from __future__ import annotations

import builtins
import shutil
import time
from pathlib import Path
from typing import Any

from kubelab.driver_store import write_json
from kubelab.errors import Conflict, FieldError, NotFound, ValidationError, did_you_mean
from kubelab.experiments import RUN_ID, Experiments
from kubelab.records import FAILED, PENDING, new_id
from kubelab.sweeps import driver
from kubelab.sweeps.importance import EVALUATOR, importance
from kubelab.sweeps.store import (
    BUDGET_FIELDS,
    RUNNING,
    SUCCEEDED,
    SweepDirectory,
    SweepState,
    SweepStore,
)
from kubelab.sweeps.sweep_record import configurations, spec_of, sweep_record


class Sweeps:
    def __init__(self, lab: Experiments):
        self.lab = lab
        self.store = SweepStore(lab.home)

    # -- creating -------------------------------------------------------------------------
    def create(
        self,
        data: Any,
        base_dir: Path | None = None,
        confine: bool = False,
        pipeline: str | None = None,
        pipeline_step: str | None = None,
    ) -> dict[str, Any]:
        """Validate a sweep spec (or `{"nni": config}`), record it and start its driver.

        Every check runs before anything is written: a refused sweep leaves no folder,
        no study and no trial behind. `pipeline` and `pipeline_step` label a sweep a
        pipeline started (and its trials).
        """
        base = Path(base_dir or Path.cwd()).resolve()
        spec = self.validate(data, base, confine)
        sweep_id = new_id()
        self.store.root.mkdir(parents=True, exist_ok=True)
        staging = self.store.root / f".{sweep_id}.new"
        staging.mkdir()
        try:
            sweep = SweepDirectory(staging)
            write_json(sweep.spec_file, spec.to_dict())
            state = SweepState(
                user=self.lab.user,
                base_dir=str(base),
                confine=confine,
                max_trials=spec.max_trials,
                max_duration=spec.max_duration,
                max_failed_trials=spec.max_failed_trials,
                running_since=time.time(),
                pipeline=pipeline,
                pipeline_step=pipeline_step,
            )
            sweep.write_state(state)
            final = self.store.sweep(sweep_id)
            staging.rename(final.path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        driver.launch(final)
        return self.record(final)

    def submit(self, data: Any, base_dir: Path | None = None, confine: bool = False) -> dict[str, Any]:
        """`create` under the name `Experiments.submit` uses (the magics call it so)."""
        return self.create(data, base_dir, confine)

    def validate(self, data: Any, base: Path, confine: bool) -> Any:
        """The SweepSpec, with the trial template's paths and the tuner checked as a submit would."""
        from kubelab.sweeps.sweep_spec import SweepSpec

        spec = SweepSpec.parse(self.spec_mapping(data, base), base_dir=base)
        if confine and spec.space_file:
            self._confined(base, Path(spec.space_file), "space_file")
        sample = dict(spec.space.representative())
        for config in reversed(spec.batch or []):
            sample.update(config)
        try:
            self.lab.prepare(spec.trial_spec(sample), base, confine)
        except ValidationError as exc:
            raise ValidationError(
                "invalid sweep spec", [FieldError(f"trial.{f.path}", f.reason) for f in exc.fields]
            ) from None
        # What Optuna alone would refuse (missing sampler packages; argument conflicts are in
        # check_tuner and check_pruner) is checked without importing it: ~0.4 s saved per create.
        unavailable = spec.tuner.unavailable()
        if unavailable is not None:
            raise ValidationError("tuner unavailable", [unavailable])
        return spec

    @staticmethod
    def spec_mapping(data: Any, base: Path) -> Any:
        """A sweep spec mapping from kubelab's own format, an NNI config or a Polyaxon matrix."""
        from kubelab.formats import sweep_mapping

        return sweep_mapping(data, base)

    @staticmethod
    def _confined(base: Path, target: Path, field: str) -> None:
        target = target.resolve()
        if target != base and base not in target.parents:
            reason = f"'{target}' is outside the workspace"
            raise ValidationError("invalid sweep spec", [FieldError(field, reason)])

    # -- reading --------------------------------------------------------------------------
    def sweep(self, sweep_id: str) -> SweepDirectory:
        if not isinstance(sweep_id, str) or not RUN_ID.match(sweep_id):
            raise NotFound(f"no sweep '{sweep_id}'", [FieldError("id", "is not a sweep id")])
        sweep = self.store.sweep(sweep_id)
        if not sweep.exists():
            raise NotFound(f"no sweep '{sweep_id}'")
        return sweep

    def list(self) -> list[dict[str, Any]]:
        """Every sweep's record, newest first (restarting drivers that died)."""
        records = []
        for sweep in self.store.all():
            try:
                self.ensure_driver(sweep)
                records.append(self.record(sweep))
            except (OSError, ValueError):
                continue  # a folder being deleted
        return records

    def get(self, sweep_id: str, with_importance: bool = True) -> dict[str, Any]:
        """The record with its trials table, parameter importance and spec.

        Importance is for viewers (`importance.py`); without `with_importance` (a CLI
        following its sweep to the end) it is None and nothing computes it.
        """
        sweep = self.sweep(sweep_id)
        self.ensure_driver(sweep)
        state = sweep.read_state()
        record = self.record(sweep, state)
        record["trials"] = self.trials(sweep, state)
        record["importance"] = importance(sweep, state) if with_importance else None
        record["importance_evaluator"] = EVALUATOR if with_importance else None
        record["spec"] = spec_of(sweep)
        return record

    def metrics(self, sweep_id: str) -> builtins.list[dict[str, Any]]:
        """Every trial's reported points (one read for the sweep view's overlaid curves),
        with the sweep's verdict on the trial (`result`: complete, pruned, failed...)."""
        sweep = self.sweep(sweep_id)
        rows = []
        for entry in sweep.read_state().entries():
            points: list[dict[str, Any]] = []
            if entry.run_id:
                try:
                    points = self.lab.metrics(entry.run_id)
                except NotFound:
                    points = []  # a trial deleted by hand keeps its row, without points
            rows.append({"trial": entry.number, "id": entry.run_id, "result": entry.state, "points": points})
        return rows

    def record(self, sweep: SweepDirectory, state: SweepState | None = None) -> dict[str, Any]:
        return sweep_record(sweep, state or sweep.read_state())

    def trials(self, sweep: SweepDirectory, state: SweepState) -> builtins.list[dict[str, Any]]:
        """The trials' experiment records, with the sweep's verdict on each (`result`, `objective`)."""
        runs = {r["id"]: r for r in self.lab.of_sweep(sweep.id)}
        rows = []
        for entry in state.entries():
            # A trial that never got a run (its submit was refused) still has a row.
            missing = {
                "id": entry.run_id,
                "status": FAILED if entry.final else PENDING,
                "params": entry.params,
                "metrics": {},
            }
            row = dict(runs.get(entry.run_id or "") or missing)
            row.update(
                trial=entry.number, result=entry.state, objective=entry.value, result_reason=entry.reason
            )
            if entry.lineage is not None:  # a PBT member: its generation and the trial it went on from
                row["lineage"] = entry.lineage
            rows.append(row)
        return rows

    # -- changing -------------------------------------------------------------------------
    def stop(self, sweep_id: str, wait: float = 30.0) -> dict[str, Any]:
        """Stop the sweep and its running trials; waits (bounded) until the driver has recorded it."""
        sweep = self.sweep(sweep_id)
        if sweep.read_state().status != RUNNING:
            raise Conflict(f"sweep '{sweep_id}' is not running")
        sweep.request_stop()
        self.ensure_driver(sweep)  # a dead driver's successor carries the stop out
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and sweep.read_state().status == RUNNING:
            time.sleep(0.05)
        return self.record(sweep)

    def resume(self, sweep_id: str, budget: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run a Stopped, Failed or Succeeded sweep again, optionally with a larger budget.

        Trials already finished keep their results and count toward `max_trials`; those the
        sweep's stop interrupted do not, and run again with the same parameters.
        A running sweep only takes the new budget.
        """
        sweep = self.sweep(sweep_id)
        changes = self.check_budget(budget or {}, sweep.read_state())
        with sweep.state_lock():
            state = sweep.read_state()
            if state.status == RUNNING:
                if not changes:
                    raise Conflict(f"sweep '{sweep_id}' is already running")
                return self._extend_locked(sweep, state, changes)
            for key, value in changes.items():
                setattr(state, key, value)
            if state.max_trials is not None and state.counted() >= state.max_trials:
                raise Conflict(
                    f"sweep '{sweep_id}' has run its max_trials ({state.max_trials}) trials; "
                    "resume it with a larger max_trials",
                    [FieldError("max_trials", f"must be more than {state.counted()} to run more trials")],
                )
            size = configurations(sweep)
            if size is not None and state.counted() >= size:
                raise Conflict(
                    f"sweep '{sweep_id}' has tried all {size} configurations of its "
                    f"{spec_of(sweep)['tuner']['name']} tuner; there is nothing left to run"
                )
            if state.max_duration is not None and state.seconds() >= state.max_duration:
                raise Conflict(
                    f"sweep '{sweep_id}' has used its max_duration ({state.max_duration:g}s)",
                    [FieldError("max_duration", f"must be more than {state.seconds():.0f}s to run longer")],
                )
            sweep.clear_stop()
            state.restart("resumed")
            sweep.write_state(state)
        driver.launch(sweep)
        return self.record(sweep)

    def extend(self, sweep_id: str, budget: dict[str, Any]) -> dict[str, Any]:
        """Change the budget (`max_trials`, `max_duration`, `max_failed_trials`).

        A running sweep's driver takes it at once; a sweep that had ended by using up its
        budget carries on (it is resumed); a Stopped or Failed sweep keeps its status until
        resumed.
        """
        sweep = self.sweep(sweep_id)
        changes = self.check_budget(budget, sweep.read_state(), required=True)
        with sweep.state_lock():
            state = sweep.read_state()
            if state.status == RUNNING:
                return self._extend_locked(sweep, state, changes)
            for key, value in changes.items():
                setattr(state, key, value)
            sweep.write_state(state)
        if state.status == SUCCEEDED and budget_left(state):
            return self.resume(sweep_id)
        return self.record(sweep)

    def _extend_locked(
        self, sweep: SweepDirectory, state: SweepState, changes: dict[str, Any]
    ) -> dict[str, Any]:
        if sweep.driver_alive():
            # durable: the driver takes the request at its next turn; answer with the budget as
            # it will be, not as the state file still says until then
            sweep.request_budget(changes)
            return {**self.record(sweep), **changes}
        else:
            for key, value in changes.items():
                setattr(state, key, value)
            sweep.write_state(state)
        return self.record(sweep)

    @staticmethod
    def check_budget(budget: Any, state: SweepState, required: bool = False) -> dict[str, Any]:
        from kubelab.quantity import parse_duration

        if not isinstance(budget, dict):
            reason = 'must be a mapping such as {"max_trials": 50}'
            raise ValidationError("invalid budget", [FieldError("", reason)])
        errors = [
            FieldError(str(k), "unknown field" + did_you_mean(str(k), BUDGET_FIELDS))
            for k in budget
            if k not in BUDGET_FIELDS
        ]
        if required and not budget:
            errors.append(FieldError("", f"give at least one of {', '.join(BUDGET_FIELDS)}"))
        changes: dict[str, Any] = {}
        for key in ("max_trials", "max_failed_trials"):
            if budget.get(key) is None:
                continue
            value = budget[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                errors.append(FieldError(key, f"must be a whole number, not {value!r}"))
            elif key == "max_trials" and value < max(1, state.counted()):
                errors.append(
                    FieldError(
                        key,
                        f"must be at least {max(1, state.counted())}: "
                        f"{state.counted()} trials have already started",
                    )
                )
            else:
                changes[key] = value
        if budget.get("max_duration") is not None:
            try:
                changes["max_duration"] = parse_duration(budget["max_duration"])
            except ValueError as exc:
                errors.append(FieldError("max_duration", str(exc)))
        if errors:
            raise ValidationError("invalid budget", errors)
        return changes

    def ensure_driver(self, sweep: SweepDirectory) -> bool:
        """Start a driver for a Running sweep that has none; True when one was started."""
        if not sweep.needs_driver():
            return False
        driver.launch(sweep)
        return True


def budget_left(state: SweepState) -> bool:
    if state.max_trials is not None and state.counted() >= state.max_trials:
        return False
    return state.max_duration is None or state.seconds() < state.max_duration
