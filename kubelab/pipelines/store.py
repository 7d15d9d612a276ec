"""The pipeline record: `$KUBELAB_HOME/pipelines/<id>/`, like a sweep's folder.

- `pipeline.json`: the validated spec (`PipelineSpec.to_dict()`, params resolved, file
  steps inline), never changed after creation.
- `state.json`: status, reason and the ledger of steps (state, attempt, the run or sweep
  id of the current attempt, the ids of earlier attempts, cache key); it, the locks,
  `stop-requested` and `driver.log` as every driver's folder (`kubelab.driver_store`).
- `../.cache/<key>.json`: successful cached steps, by cache key (spec, params, input digests).

Steps are ordinary run directories and sweep folders labelled with the pipeline's id and
the step's name, so a crash between a submit and the ledger write is healed by finding them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kubelab.driver_store import FAILED as FAILED
from kubelab.driver_store import RUNNING as RUNNING
from kubelab.driver_store import STOPPED as STOPPED
from kubelab.driver_store import SUCCEEDED as SUCCEEDED
from kubelab.driver_store import DriverDirectory, DriverLedger, DriverStore, write_json
from kubelab.records import utcnow

# A step's place in the ledger. `submitting` is written before the step's run exists.
WAITING, SUBMITTING, ACTIVE = "waiting", "submitting", "running"
DONE, STEP_FAILED, STEP_STOPPED = "succeeded", "failed", "stopped"
STEP_FINAL = frozenset({DONE, STEP_FAILED, STEP_STOPPED})


@dataclass
class StepEntry:
    name: str
    kind: str
    state: str = WAITING
    attempt: int = 0  # 1 for the first try, 2 for the first retry, ...
    id: str | None = None  # the current attempt's run (experiment) or sweep id
    previous: list[str] = field(default_factory=list)  # ids of earlier attempts
    reason: str = ""
    cached: bool = False
    cache_key: str | None = None
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def final(self) -> bool:
        return self.state in STEP_FINAL


@dataclass
class PipelineState(DriverLedger):
    ENTRIES: ClassVar[str] = "steps"
    ENTRY: ClassVar[type] = StepEntry

    schedule: str | None = None  # the schedule that started it, if any
    engine: str = "driver"  # or "argo": its steps are the tasks of the Workflow `workflow`
    workflow: str | None = None
    driver_pid: int | None = None
    steps: dict[str, StepEntry] = field(default_factory=dict)

    def finish(self, status: str, reason: str) -> None:
        self.status, self.reason, self.finished_at, self.driver_pid = status, reason, utcnow(), None


class PipelineDirectory(DriverDirectory):
    """One pipeline's folder; every reader and writer of pipeline files goes through it."""

    spec_name = "pipeline.json"

    def read_state(self) -> PipelineState:
        return PipelineState.from_dict(self.state_data())

    def write_state(self, state: PipelineState) -> None:
        write_json(self.state_file, state.to_dict())


class PipelineStore(DriverStore[PipelineDirectory]):
    """All pipelines under `$KUBELAB_HOME/pipelines/`, and the step cache beside them."""

    def __init__(self, home: Path):
        super().__init__(home, "pipelines", PipelineDirectory)
        self.cache_root = self.root / ".cache"

    def pipeline(self, pipeline_id: str) -> PipelineDirectory:
        return self.item(pipeline_id)

    def cached(self, key: str) -> dict[str, Any] | None:
        try:
            entry: dict[str, Any] = json.loads((self.cache_root / f"{key}.json").read_text())
            return entry
        except (FileNotFoundError, ValueError):
            return None

    def remember(self, key: str, kind: str, step_id: str, pipeline_id: str) -> None:
        self.cache_root.mkdir(parents=True, exist_ok=True)
        write_json(self.cache_root / f"{key}.json", {"kind": kind, "id": step_id, "pipeline": pipeline_id})
