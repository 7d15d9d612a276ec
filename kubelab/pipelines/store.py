"""The pipeline record: `$KUBELAB_HOME/pipelines/<id>/`, like a sweep's folder.

- `pipeline.json`: the validated spec (`PipelineSpec.to_dict()`, params resolved, file
  steps inline), never changed after creation.
- `state.json`: status, reason and the ledger of steps (state, attempt, the run or sweep
  id of the current attempt, the ids of earlier attempts, cache key). Written atomically,
  only by whoever holds the pipeline: its driver while one lives (`driver.lock`, flock'ed
  for its whole life), else a controller holding `state.lock`.
- `stop-requested`: a controller's request to the live driver; `driver.log`: its output.
- `../.cache/<key>.json`: successful cached steps, by cache key (spec, params, input digests).

Steps are ordinary run directories and sweep folders labelled with the pipeline's id and
the step's name, so a crash between a submit and the ledger write is healed by finding them.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab.records import utcnow
from kubelab.sweeps.store import _flock, write_json

RUNNING, SUCCEEDED, FAILED, STOPPED = "Running", "Succeeded", "Failed", "Stopped"
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
class PipelineState:
    status: str = RUNNING
    reason: str = "starting"
    created_at: str = field(default_factory=utcnow)
    finished_at: str | None = None
    user: str | None = None
    base_dir: str = ""
    confine: bool = False
    schedule: str | None = None  # the schedule that started it, if any
    driver_pid: int | None = None
    steps: dict[str, StepEntry] = field(default_factory=dict)

    def finish(self, status: str, reason: str) -> None:
        self.status, self.reason, self.finished_at, self.driver_pid = status, reason, utcnow(), None

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["steps"] = {k: dict(vars(v)) for k, v in self.steps.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["steps"] = {k: StepEntry(**v) for k, v in (data.get("steps") or {}).items()}
        return cls(**known)


class PipelineDirectory:
    """One pipeline's folder; every reader and writer of pipeline files goes through it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.name

    @property
    def home(self) -> Path:
        return self.path.parent.parent

    @property
    def spec_file(self) -> Path:
        return self.path / "pipeline.json"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def stop_file(self) -> Path:
        return self.path / "stop-requested"

    @property
    def log_file(self) -> Path:
        return self.path / "driver.log"

    def exists(self) -> bool:
        return self.state_file.exists()

    def spec_data(self) -> dict[str, Any]:
        return json.loads(self.spec_file.read_text())

    def read_state(self) -> PipelineState:
        return PipelineState.from_dict(json.loads(self.state_file.read_text()))

    def write_state(self, state: PipelineState) -> None:
        write_json(self.state_file, state.to_dict())

    def state_mtime(self) -> int | None:
        try:
            return self.state_file.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    @contextlib.contextmanager
    def driver_lock(self) -> Iterator[bool]:
        with _flock(self.path / "driver.lock", blocking=False) as got:
            yield got

    @contextlib.contextmanager
    def state_lock(self) -> Iterator[None]:
        with _flock(self.path / "state.lock", blocking=True):
            yield

    def driver_alive(self) -> bool:
        with self.driver_lock() as free:
            return not free

    def request_stop(self) -> None:
        self.stop_file.write_text(utcnow())

    def stop_requested(self) -> bool:
        return self.stop_file.exists()

    def clear_stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.stop_file.unlink()


class PipelineStore:
    """All pipelines under `$KUBELAB_HOME/pipelines/`, and the step cache beside them."""

    def __init__(self, home: Path):
        self.root = Path(home) / "pipelines"
        self.cache_root = self.root / ".cache"

    def pipeline(self, pipeline_id: str) -> PipelineDirectory:
        return PipelineDirectory(self.root / pipeline_id)

    def all(self) -> list[PipelineDirectory]:
        try:
            names = sorted(os.listdir(self.root), reverse=True)
        except FileNotFoundError:
            return []
        return [p for p in (self.pipeline(n) for n in names if not n.startswith(".")) if p.exists()]

    def cached(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.cache_root / f"{key}.json").read_text())
        except (FileNotFoundError, ValueError):
            return None

    def remember(self, key: str, kind: str, step_id: str, pipeline_id: str) -> None:
        self.cache_root.mkdir(parents=True, exist_ok=True)
        write_json(self.cache_root / f"{key}.json", {"kind": kind, "id": step_id, "pipeline": pipeline_id})
