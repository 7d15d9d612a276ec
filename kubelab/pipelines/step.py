"""`kubelab pipeline step PIPELINE_ID STEP`: run one step of a pipeline, as the driver does.

What each task of an `engine: argo` Workflow runs (`kubelab.pipelines.argo_workflow`). It is
the pipeline driver narrowed to one step, so a step has one definition however it is run:
the driver's code fills its templates from the records of the steps before it, submits its
experiment or sweep (as Jobs, with the Kubernetes backend), reuses a cached result, follows
it and records how it ended, retries included (Argo's `retryStrategy` starts the pod again;
the ledger counts the attempts, as the driver's does).

Several steps run at once, each in its own pod, all writing `state.json`: a step writes
only its own entry, read-modify-written under the folder's state lock (flock), so no step's
write loses another's. A step that failed for good also fails the steps waiting on it (Argo
never runs a failed task's dependants), and whichever step ends last writes the pipeline's
status (`driver.verdict`). A stopped pipeline (`kubelab pipeline stop`) is the stopper's
record: a step that sees it writes nothing more and stops what it started.
"""

from __future__ import annotations

import contextlib
import sys
import time

from kubelab.errors import Conflict, FieldError, NotFound
from kubelab.pipelines.driver import POLL, Driver, upstream_failure, verdict
from kubelab.pipelines.store import (
    ACTIVE,
    DONE,
    RUNNING,
    STEP_FAILED,
    SUBMITTING,
    WAITING,
    PipelineDirectory,
    StepEntry,
)
from kubelab.records import utcnow


class Stopped(Exception):
    """The pipeline ended (stopped) while this step ran: its record is no longer ours."""


class StepRunner(Driver):
    def __init__(self, pipeline: PipelineDirectory, name: str):
        super().__init__(pipeline)
        self.name = name

    def run(self) -> int:
        """0 once the step succeeded; 1 when it failed (Argo retries it while `retries` allow)."""
        self.state = self.pipeline.read_state()
        if self.name not in self.state.steps:
            raise NotFound(
                f"pipeline '{self.pipeline.id}' has no step '{self.name}'",
                [FieldError("step", f"is not one of {', '.join(self.state.steps)}")],
            )
        if self.state.status != RUNNING:
            raise Conflict(f"pipeline '{self.pipeline.id}' is {self.state.status}: {self.state.reason}")
        self.prepare()
        try:
            return self.follow()
        finally:
            self.lab.backend.close()  # its watch threads would outlive the step at exit

    def follow(self) -> int:
        step, entry = self.spec.step(self.name), self.state.steps[self.name]
        try:
            if entry.state == SUBMITTING:  # a pod that died between the ledger and its submit
                self.adopt(entry)
                self.save()
            if entry.state == WAITING:
                self.consider(step, entry)
                if entry.state == WAITING:
                    waiting = [d for d in step.depends_on if self.state.steps[d].state != DONE]
                    print(f"step {self.name}: waits for {', '.join(waiting)}", file=sys.stderr)
                    return 1
            while entry.state == ACTIVE:
                self.check(entry)
                if entry.state == ACTIVE:
                    if self.pipeline.read_state().status != RUNNING:
                        raise Stopped()
                    time.sleep(POLL)
        except Stopped:
            self.stop_started()
            print(f"step {self.name}: the pipeline was stopped", file=sys.stderr)
            return 1
        print(
            f"step {self.name}: {entry.state} {entry.kind} {entry.id or ''} {entry.reason}".rstrip(),
            file=sys.stderr,
        )
        return 0 if entry.state == DONE else 1

    def save(self) -> None:
        """Write this step's entry (and what it decides for the others) into the fresh ledger."""
        entry = self.state.steps[self.name]
        with self.pipeline.state_lock():
            fresh = self.pipeline.read_state()
            if fresh.status != RUNNING:
                raise Stopped()
            fresh.steps[self.name] = entry
            self.fail_dependants(fresh.steps)
            ended = verdict(fresh.steps)
            if ended:
                fresh.finish(*ended)
            self.pipeline.write_state(fresh)
            self.state = fresh

    def fail_dependants(self, steps: dict[str, StepEntry]) -> None:
        """Fail every waiting step downstream of a step that failed for good, as the driver would."""
        changed = True
        while changed:
            changed = False
            for step in self.spec.steps:
                entry, why = steps[step.name], upstream_failure(step.depends_on, steps)
                if entry.state == WAITING and why:
                    entry.state, entry.reason, entry.finished_at = STEP_FAILED, why, utcnow()
                    changed = True

    def stop_started(self) -> None:
        """Stop this step's run or sweep, if this attempt submitted one."""
        entry = self.state.steps[self.name]
        if entry.id and entry.state == ACTIVE:
            with contextlib.suppress(Exception):
                if entry.kind == "experiment":
                    self.lab.stop(entry.id)
                else:
                    self.sweeps.stop(entry.id, wait=0)
