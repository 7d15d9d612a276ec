"""Pipelines as a service: what the CLI, the REST handlers and the magics call.

`Pipelines(lab)` validates a pipeline (every step's spec and paths, as a submit would),
writes its folder and starts its driver; lists, shows (with each step's record), stops
and resumes pipelines. Whoever looks at a Running pipeline whose driver died starts a new
one, so a pipeline carries on after a crash or a reboot.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from kubelab.backends.base import ClusterAccess
from kubelab.driver_store import write_json
from kubelab.errors import Conflict, FieldError, NotFound, ValidationError
from kubelab.experiments import RUN_ID, Experiments
from kubelab.pipelines import argo, argo_workflow, driver, engines
from kubelab.pipelines.spec import EXPERIMENT, PipelineSpec, placeholders
from kubelab.pipelines.store import (
    DONE,
    RUNNING,
    STOPPED,
    WAITING,
    PipelineDirectory,
    PipelineState,
    PipelineStore,
    StepEntry,
)
from kubelab.records import new_id


class Pipelines:
    def __init__(self, lab: Experiments):
        self.lab = lab
        self.store = PipelineStore(lab.home)

    # -- creating -------------------------------------------------------------------------
    def validate(
        self,
        data: Any,
        base_dir: Path | None = None,
        confine: bool = False,
        params: dict[str, Any] | None = None,
    ) -> PipelineSpec:
        """The PipelineSpec, each step's paths checked as its submit would check them."""
        from kubelab.formats.polyaxon_dag import translate
        from kubelab.pipelines.references import render
        from kubelab.sweeps.service import Sweeps

        base = Path(base_dir or Path.cwd()).resolve()
        spec = PipelineSpec.parse(translate(data, base), base_dir=base, params=params)
        engines.require(spec.engine, self.lab.backend)
        problems: list[FieldError] = []
        for step in spec.steps:
            sample = render(step.spec, placeholders(spec, step.spec))
            where = f"steps.{step.name}.{step.kind}"
            try:
                if step.kind == EXPERIMENT:
                    self.lab.prepare(sample, base, confine)
                else:
                    Sweeps(self.lab).validate(sample, base, confine)
            except ValidationError as exc:
                problems += [FieldError(f"{where}.{f.path}", f.reason) for f in exc.fields]
        if problems:
            raise ValidationError("invalid pipeline spec", problems)
        return spec

    def create(
        self,
        data: Any,
        base_dir: Path | None = None,
        confine: bool = False,
        params: dict[str, Any] | None = None,
        schedule: str | None = None,
    ) -> dict[str, Any]:
        """Validate, write the pipeline's folder (atomically: a refused one leaves nothing) and start it."""
        base = Path(base_dir or Path.cwd()).resolve()
        spec = self.validate(data, base, confine, params)
        pipeline_id = new_id()
        self.store.root.mkdir(parents=True, exist_ok=True)
        staging = self.store.root / f".{pipeline_id}.new"
        staging.mkdir()
        try:
            folder = PipelineDirectory(staging)
            write_json(folder.spec_file, spec.to_dict())
            state = PipelineState(
                user=self.lab.user, base_dir=str(base), confine=confine, schedule=schedule, engine=spec.engine
            )
            if spec.engine == "argo":
                state.workflow = argo_workflow.workflow_name(pipeline_id)
            state.steps = {s.name: StepEntry(s.name, s.kind) for s in spec.steps}
            folder.write_state(state)
            final = self.store.pipeline(pipeline_id)
            staging.rename(final.path)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if spec.engine == "argo":
            try:  # the Workflow's pods read the folder, so it exists first; refused, it goes
                argo.submit(self.cluster(), pipeline_id, spec.name or pipeline_id, spec.to_dict()["steps"])
            except BaseException:
                shutil.rmtree(final.path, ignore_errors=True)
                raise
        else:
            driver.launch(final)
        return self.record(final)

    def cluster(self) -> ClusterAccess:
        """Where an Argo pipeline's Workflow lives (`engines.require` admitted it: the backend has one)."""
        cluster = self.lab.backend.cluster()
        if cluster is None:  # a pipeline made on a cluster, stopped where the backend has none
            raise Conflict(
                f"an argo pipeline's Workflow needs a Kubernetes backend; this is {self.lab.backend.name}"
            )
        return cluster

    # -- reading --------------------------------------------------------------------------
    def pipeline(self, pipeline_id: str) -> PipelineDirectory:
        if not isinstance(pipeline_id, str) or not RUN_ID.match(pipeline_id):
            raise NotFound(f"no pipeline '{pipeline_id}'", [FieldError("id", "is not a pipeline id")])
        pipeline = self.store.pipeline(pipeline_id)
        if not pipeline.exists():
            raise NotFound(f"no pipeline '{pipeline_id}'")
        return pipeline

    def list(self) -> list[dict[str, Any]]:
        records = []
        for pipeline in self.store.all():
            try:
                self.ensure_driver(pipeline)
                records.append(self.record(pipeline))
            except (OSError, ValueError):
                continue
        return records

    def get(self, pipeline_id: str) -> dict[str, Any]:
        """The record with each step's experiment or sweep record and the spec."""
        pipeline = self.pipeline(pipeline_id)
        self.ensure_driver(pipeline)
        record = self.record(pipeline)
        record["spec"] = pipeline.spec_data()
        for step in record["steps"]:
            step["record"] = self.step_record(step)
        return record

    def step_record(self, step: dict[str, Any]) -> dict[str, Any] | None:
        from kubelab.sweeps.service import Sweeps

        if not step["id"]:
            return None
        try:
            if step["kind"] == EXPERIMENT:
                return self.lab.get(step["id"])
            return Sweeps(self.lab).record(Sweeps(self.lab).sweep(step["id"]))
        except (NotFound, OSError, ValueError):
            return None

    def record(self, pipeline: PipelineDirectory, state: PipelineState | None = None) -> dict[str, Any]:
        return pipeline_record(pipeline, state or pipeline.read_state())

    # -- changing -------------------------------------------------------------------------
    def stop(self, pipeline_id: str, wait: float = 30.0) -> dict[str, Any]:
        """Stop the pipeline and its running steps; waits (bounded) until the driver recorded it."""
        pipeline = self.pipeline(pipeline_id)
        state = pipeline.read_state()
        if state.status != RUNNING:
            raise Conflict(f"pipeline '{pipeline_id}' is not running")
        if state.engine == "argo":
            return self.stop_workflow(pipeline, state.workflow or "")
        pipeline.request_stop()
        self.ensure_driver(pipeline)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and pipeline.read_state().status == RUNNING:
            time.sleep(0.05)
        return self.record(pipeline)

    def stop_workflow(self, pipeline: PipelineDirectory, workflow: str) -> dict[str, Any]:
        """Terminate an argo pipeline's Workflow, stop the steps it started and record it stopped.

        Under the state lock, so a step's pod writing its entry waits and then sees the stop."""
        argo.terminate(self.cluster(), workflow)
        with pipeline.state_lock():
            steps = driver.Driver(pipeline)
            steps.state = pipeline.read_state()
            if steps.state.status == RUNNING:
                steps.prepare()
                steps.stop_steps()
                steps.end(STOPPED, "stopped by user (Workflow terminated)")
        return self.record(pipeline)

    def resume(self, pipeline_id: str) -> dict[str, Any]:
        """Run again every step that did not succeed (with fresh retries); succeeded ones are kept."""
        pipeline = self.pipeline(pipeline_id)
        with pipeline.state_lock():
            state = pipeline.read_state()
            if state.engine == "argo":
                reason = (
                    "argo: a Workflow is not resumed by kubelab; run the pipeline again (steps with "
                    "`cache: true` reuse their earlier results), or use `argo retry` on the Workflow"
                )
                problem = FieldError("engine", reason)
                raise ValidationError(f"cannot resume pipeline '{pipeline_id}'", [problem])
            if state.status == RUNNING:
                raise Conflict(f"pipeline '{pipeline_id}' is already running")
            if all(e.state == DONE for e in state.steps.values()):
                raise Conflict(f"pipeline '{pipeline_id}' has no step left to run: every step succeeded")
            for entry in state.steps.values():
                if entry.state != DONE:
                    if entry.id:
                        entry.previous.append(entry.id)
                    entry.state, entry.id, entry.attempt, entry.reason = WAITING, None, 0, "resumed"
                    entry.finished_at = None
            state.status, state.reason, state.finished_at = RUNNING, "resumed", None
            pipeline.clear_stop()
            pipeline.write_state(state)
        driver.launch(pipeline)
        return self.record(pipeline)

    def ensure_driver(self, pipeline: PipelineDirectory) -> bool:
        """Start a driver for a Running pipeline that has none; True when one was started.
        An argo pipeline has none: its Workflow's tasks run the steps."""
        if not pipeline.needs_driver() or pipeline.read_state().engine != "driver":
            return False
        driver.launch(pipeline)
        return True


def pipeline_record(pipeline: PipelineDirectory, state: PipelineState) -> dict[str, Any]:
    """The pipeline as clients see it (REST, CLI, the sidebar's graph, the widget)."""
    spec = pipeline.spec_data()
    steps: list[dict[str, Any]] = []
    for step in spec["steps"]:
        entry = state.steps.get(step["name"]) or StepEntry(step["name"], EXPERIMENT)
        steps.append(
            {
                "name": entry.name,
                "kind": entry.kind,
                "state": entry.state,
                "id": entry.id,
                "attempt": entry.attempt,
                "previous": entry.previous,
                "reason": entry.reason,
                "cached": entry.cached,
                "depends_on": step.get("depends_on") or [],
                "started_at": entry.started_at,
                "finished_at": entry.finished_at,
            }
        )
    counts: dict[str, int] = {}
    for step in steps:
        counts[step["state"]] = counts.get(step["state"], 0) + 1
    return {
        "id": pipeline.id,
        "name": spec.get("name") or pipeline.id,
        "status": state.status,
        "reason": state.reason,
        "params": spec.get("params") or {},
        "steps": steps,
        "counts": counts,
        "created_at": state.created_at,
        "finished_at": state.finished_at,
        "user": state.user,
        "schedule": state.schedule,
        "engine": state.engine,
        "workflow": state.workflow,
    }


class PipelineWatcher:
    """For the server's event stream: which pipelines changed since the last look.

    Every `liveness` seconds it also restarts the driver of any Running pipeline whose
    driver died (the scheduler has its keeper: `kubelab.schedules.scheduler.SchedulerKeeper`).
    """

    def __init__(self, lab: Experiments, liveness: float = 5.0):
        self.pipelines = Pipelines(lab)
        self.stamps: dict[str, int | None] = {}
        self.liveness = liveness
        self.checked = 0.0

    def start(self) -> None:
        for pipeline in self.pipelines.store.all():
            self.stamps[pipeline.id] = pipeline.state_mtime()
        self.keep_alive()

    def keep_alive(self) -> None:
        self.checked = time.monotonic()
        for pipeline in self.pipelines.store.all():
            try:
                self.pipelines.ensure_driver(pipeline)
            except (OSError, ValueError):
                continue

    def poll(self) -> list[dict[str, Any]]:
        """Records of the pipelines whose state changed (new ones included)."""
        if time.monotonic() - self.checked > self.liveness:
            self.keep_alive()
        changed = []
        for pipeline in self.pipelines.store.all():
            stamp = pipeline.state_mtime()
            if stamp == self.stamps.get(pipeline.id):
                continue
            self.stamps[pipeline.id] = stamp
            try:
                changed.append(self.pipelines.record(pipeline))
            except (OSError, ValueError):
                continue
        return changed
