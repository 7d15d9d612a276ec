"""The pipeline driver: one detached process per running pipeline, `python -m kubelab.pipelines.driver DIR`.

It starts each step once the steps it depends on succeeded (filling its templates from
their results), follows the step's experiment or sweep, retries a failed step up to its
`retries`, fails the steps that depended on a step that failed for good, and ends the
pipeline with a status and a reason. It lives in its own session, like the sweep driver,
so it outlives the server or CLI that started it; whoever sees a Running pipeline whose
driver is dead starts another.

Restartable by construction (kill it at any instant, start it again):

- a step's ledger entry says `submitting` (with its attempt) before its run exists;
- runs and sweeps carry the pipeline's id and the step's name, so a crash between a
  submit and the ledger write is healed by finding the step's run that is not one of its
  earlier attempts (`previous`), never by submitting again;
- a step's end (and its retry) is one ledger write; a driver that dies before it looks
  at the finished run again.

`KUBELAB_PIPELINE_CRASH=point:n` makes the driver die (`os._exit`) the n-th time it reaches
`point` (before-submit, after-submit, after-end); the tests use it at each step boundary.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from kubelab.daemon import start_module
from kubelab.pipelines.store import (
    ACTIVE,
    DONE,
    FAILED,
    RUNNING,
    STEP_FAILED,
    STEP_STOPPED,
    STOPPED,
    SUBMITTING,
    SUCCEEDED,
    WAITING,
    PipelineDirectory,
    PipelineState,
    PipelineStore,
    StepEntry,
)
from kubelab.records import PRUNED, RunDirectory, utcnow

POLL = 0.05  # seconds between looks at the running steps
RECONCILE_EVERY = 1.0  # seconds between asking the backend (or the sweeps) about a quiet step
STOP_WAIT = 30.0


def launch(pipeline: PipelineDirectory) -> int:
    """Start a detached driver for `pipeline`; a second driver for it exits at once."""
    return start_module("kubelab.pipelines.driver", str(pipeline.path), pipeline.log_file).pid


class Driver:
    def __init__(self, pipeline: PipelineDirectory):
        self.pipeline = pipeline
        self.state = PipelineState()
        self.hits: Counter[str] = Counter()
        self.checked: dict[str, float] = {}

    # -- the process ------------------------------------------------------------------
    def main(self) -> int:
        with self.pipeline.driver_lock() as mine:
            if not mine:
                return 0
            with self.pipeline.state_lock():
                self.state = self.pipeline.read_state()
                if self.state.status != RUNNING or self.state.engine != "driver":
                    return 0  # an argo pipeline's steps are run by its Workflow's tasks
                self.state.driver_pid, self.state.reason = os.getpid(), "running"
                self.save()
            try:
                self.prepare()
                self.recover()
                self.loop()
            except Exception as exc:  # a pipeline always ends with a status and a reason
                traceback.print_exc()
                self.stop_steps()
                self.state.finish(FAILED, f"pipeline driver error: {exc}")
                self.save()
        return 0

    def prepare(self) -> None:
        from kubelab.experiments import Experiments
        from kubelab.pipelines.spec import PipelineSpec
        from kubelab.sweeps.service import Sweeps

        self.lab = Experiments(self.pipeline.home, user=self.state.user)
        self.sweeps = Sweeps(self.lab)
        self.store = PipelineStore(self.pipeline.home)
        self.base = Path(self.state.base_dir)
        self.spec = PipelineSpec.parse(self.pipeline.spec_data(), base_dir=self.base)

    def save(self) -> None:
        self.pipeline.write_state(self.state)

    def crash_point(self, point: str) -> None:
        name, _, count = os.environ.get("KUBELAB_PIPELINE_CRASH", "").partition(":")
        if name == point:
            self.hits[point] += 1
            if self.hits[point] == int(count or 1):
                os._exit(137)

    # -- after a restart ----------------------------------------------------------------
    def recover(self) -> None:
        """Adopt the run of a step whose submit the ledger did not see finish."""
        for entry in self.state.steps.values():
            if entry.state == SUBMITTING:
                self.adopt(entry)
        self.save()

    def adopt(self, entry: StepEntry) -> None:
        """A `submitting` step: running if its run exists, else waiting to submit this attempt."""
        found = self.find(entry)
        if found:
            entry.id, entry.state = found, ACTIVE
        else:
            entry.state = WAITING  # never submitted: the loop submits this attempt
            entry.attempt -= 1

    def find(self, entry: StepEntry) -> str | None:
        """The id of this step's run or sweep that is not an earlier attempt's."""
        known = set(entry.previous)
        if entry.kind == "experiment":
            for path in sorted(self.lab.runs_root.iterdir(), reverse=True):
                try:
                    status = json.loads(RunDirectory(path).status_file.read_text())
                except (OSError, ValueError):
                    continue
                if (
                    status.get("pipeline") == self.pipeline.id
                    and status.get("pipeline_step") == entry.name
                    and status.get("sweep") is None
                    and path.name not in known
                ):
                    return path.name
            return None
        for sweep in self.sweeps.store.all():
            state = sweep.read_state()
            mine = state.pipeline == self.pipeline.id and state.pipeline_step == entry.name
            if mine and sweep.id not in known:
                return sweep.id
        return None

    # -- the loop -------------------------------------------------------------------------
    def loop(self) -> None:
        while True:
            if self.pipeline.stop_requested():
                self.stop_steps()
                self.end(STOPPED, "stopped by user")
                return
            for entry in list(self.state.steps.values()):
                if entry.state == ACTIVE:
                    self.check(entry)
            for step in self.spec.steps:
                entry = self.state.steps[step.name]
                if entry.state == WAITING:
                    self.consider(step, entry)
            ended = verdict(self.state.steps)
            if ended:
                self.end(*ended)
                return
            time.sleep(POLL)

    def consider(self, step: Any, entry: StepEntry) -> None:
        """Start a waiting step whose dependencies succeeded; fail it if one of them failed."""
        deps = [self.state.steps[d] for d in step.depends_on]
        broken = upstream_failure(step.depends_on, self.state.steps)
        if broken:
            self.conclude(entry, STEP_FAILED, broken)
        elif all(d.state == DONE for d in deps):
            self.start(step, entry)

    def start(self, step: Any, entry: StepEntry) -> None:
        from kubelab.errors import KubelabError
        from kubelab.pipelines import results
        from kubelab.pipelines.references import render

        try:
            found = results.values(
                step.spec, self.spec.params, self.state.steps, self.lab.runs_root, self.pipeline.home
            )
        except results.Missing as exc:
            self.conclude(entry, STEP_FAILED, f"could not start: {exc}")
            return
        data = render(step.spec, found)
        if step.kind != "experiment" and not data.get("name"):
            # Its trials then read "<pipeline>.<step> #3" in every list, not the sweep's id.
            data["name"] = f"{self.spec.name or self.pipeline.id}.{step.name}"
        if step.cache and self.reuse(step, entry, found):
            return
        if entry.id:
            entry.previous.append(entry.id)
        entry.id, entry.state, entry.attempt = None, SUBMITTING, entry.attempt + 1
        entry.started_at, entry.finished_at = entry.started_at or utcnow(), None
        self.save()  # the attempt is in the ledger before its run exists
        self.crash_point("before-submit")
        labels = {"pipeline": self.pipeline.id, "pipeline_step": step.name}
        try:
            if step.kind == "experiment":
                record = self.lab.submit(data, base_dir=self.base, confine=self.state.confine, **labels)
            else:
                record = self.sweeps.create(data, base_dir=self.base, confine=self.state.confine, **labels)
        except KubelabError as exc:
            self.conclude(entry, STEP_FAILED, "could not start: " + exc.message().replace("\n", ";"))
            return
        self.crash_point("after-submit")
        entry.id, entry.state, entry.reason = record["id"], ACTIVE, ""
        self.save()

    def reuse(self, step: Any, entry: StepEntry, found: dict[str, Any]) -> bool:
        """Take an earlier run's result when the step's cache key matches a step that succeeded."""
        from kubelab.pipelines import results

        entry.cache_key = results.cache_key(step.kind, step.spec, found, self.base)
        from kubelab.experiments import RUN_ID

        hit = self.store.cached(entry.cache_key) if entry.cache_key else None
        if not hit or hit.get("kind") != step.kind or not RUN_ID.match(str(hit.get("id"))):
            return False
        if self.outcome(step.kind, hit["id"])[0] != DONE:  # deleted since, or not a success
            return False
        entry.id, entry.cached = hit["id"], True
        reason = f"reused {hit['id']} from pipeline {hit.get('pipeline')} (inputs unchanged)"
        self.conclude(entry, DONE, reason)
        return True

    # -- one step -----------------------------------------------------------------------
    def outcome(self, kind: str, step_id: str, reconcile: bool = False) -> tuple[str | None, str]:
        """(step state, reason) for a finished experiment or sweep; (None, "") while it runs."""
        from kubelab.records import RunDirectory

        try:
            if kind == "experiment":
                run = RunDirectory(self.lab.runs_root / step_id)
                status = run.status()
                if reconcile and not status.terminal:
                    status = self.lab.backend.reconcile(run, status)
                state, reason = status.state, status.reason
            else:
                sweep = self.sweeps.store.sweep(step_id)
                if reconcile:
                    self.sweeps.ensure_driver(sweep)
                sweep_state = sweep.read_state()
                state, reason = sweep_state.status, sweep_state.reason
        except (OSError, ValueError):
            return STEP_FAILED, f"its {kind} {step_id} was deleted"
        if state == SUCCEEDED:
            return DONE, reason
        if state in (FAILED, PRUNED):
            return STEP_FAILED, f"{kind} {step_id} {state.lower()}: {reason}"
        if state == STOPPED:
            return STEP_STOPPED, f"{kind} {step_id} stopped: {reason}"
        return None, ""

    def check(self, entry: StepEntry) -> None:
        now = time.monotonic()
        quiet = now - self.checked.get(entry.name, 0.0) > RECONCILE_EVERY
        if quiet:
            self.checked[entry.name] = now
        assert entry.id is not None
        state, reason = self.outcome(entry.kind, entry.id, reconcile=quiet)
        if state is None:
            return
        step = self.spec.step(entry.name)
        if state == DONE:
            if step.cache and entry.cache_key:
                self.store.remember(entry.cache_key, entry.kind, entry.id, self.pipeline.id)
            self.conclude(entry, DONE, "")
        elif state == STEP_FAILED and entry.attempt <= step.retries:
            entry.state, entry.reason = WAITING, f"retrying after attempt {entry.attempt}: {reason}"
            self.crash_point("after-end")
            self.save()
        else:
            self.conclude(entry, state, reason)

    def conclude(self, entry: StepEntry, state: str, reason: str) -> None:
        entry.state, entry.reason, entry.finished_at = state, reason, utcnow()
        self.crash_point("after-end")
        self.save()

    # -- the end --------------------------------------------------------------------------
    def stop_steps(self) -> None:
        """Stop every running step, wait (bounded) for each to end, and record how."""
        active = [(e, e.id) for e in self.state.steps.values() if e.state == ACTIVE and e.id]
        for entry, step_id in active:
            try:
                if entry.kind == "experiment":
                    self.lab.stop(step_id)
                else:
                    self.sweeps.stop(step_id, wait=0)
            except Exception:  # one step's stop failing must not keep the others running
                traceback.print_exc()
        deadline = time.monotonic() + STOP_WAIT
        while active and time.monotonic() < deadline:
            for entry, step_id in list(active):
                state, reason = self.outcome(entry.kind, step_id, reconcile=True)
                if state is not None:
                    active.remove((entry, step_id))
                    self.conclude(entry, state, reason)
            time.sleep(POLL)
        for entry in self.state.steps.values():
            if not entry.final:
                entry.state, entry.reason = STEP_STOPPED, "the pipeline was stopped"
        self.save()

    def end(self, status: str, reason: str) -> None:
        self.state.finish(status, reason)
        self.pipeline.clear_stop()
        self.save()


def upstream_failure(depends_on: list[str], steps: dict[str, StepEntry]) -> str | None:
    """Why a step cannot run because a step it depends on ended without succeeding, if one did."""
    broken = [steps[d] for d in depends_on if steps[d].final and steps[d].state != DONE]
    return f"upstream step '{broken[0].name}' {broken[0].state}" if broken else None


def verdict(steps: dict[str, StepEntry]) -> tuple[str, str] | None:
    """The pipeline's (status, reason) once every step is final; None while one is not."""
    if not all(e.final for e in steps.values()):
        return None
    failed = [e for e in steps.values() if e.state != DONE]
    if failed:
        return FAILED, "failed steps: " + ", ".join(f"{e.name} ({e.reason})" for e in failed)
    return SUCCEEDED, f"{len(steps)} steps succeeded"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kubelab.pipelines.driver PIPELINE_DIR", file=sys.stderr)
        return 2
    return Driver(PipelineDirectory(Path(args[0]))).main()


if __name__ == "__main__":
    sys.exit(main())
