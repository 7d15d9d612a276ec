"""The run directory is the record of an experiment.

`$KUBELAB_HOME/runs/<id>/` holds `spec.json`, `status.json`, `code/`, `logs/`,
`metrics.jsonl`, `system.jsonl` (GPU and process samples), `environment.json` (what it ran
with; kubelab/provenance.py), `notes.json` (tags and a note added later), `tensorboard/` and
`outputs/`.
Everything else (indexes, event streams, the sidebar) is derived from these files and can
be rebuilt from them. Writes are atomic (write + rename) so a reader never sees half a status.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kubelab.priorities import NORMAL_PRIORITY
from kubelab.run_notes import checked_notes, checked_tracking
from kubelab.system_digest import summarize_file
from kubelab.system_metrics import system_fields

PENDING, QUEUED, RUNNING = "Pending", "Queued", "Running"
SUCCEEDED, FAILED, STOPPED, PRUNED = "Succeeded", "Failed", "Stopped", "Pruned"
PREEMPTED = "Preempted"  # gave its GPUs to a higher-priority run; waits to resume (not an end)
BUILDING = "Building"  # its environment is being built (kubelab.environments), logged in logs/build.log
STATES = (PENDING, QUEUED, BUILDING, RUNNING, PREEMPTED, SUCCEEDED, FAILED, STOPPED, PRUNED)
TERMINAL = frozenset({SUCCEEDED, FAILED, STOPPED, PRUNED})

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_id(now: float | None = None) -> str:
    """A 12-character id that sorts by creation time: 9 chars of milliseconds, 3 random.

    It is also a valid DNS-1123 label, so Kubernetes names can be built from it.
    """
    millis = int((time.time() if now is None else now) * 1000)
    stamp = ""
    for _ in range(9):
        millis, digit = divmod(millis, 32)
        stamp = _ALPHABET[digit] + stamp
    noise = int.from_bytes(os.urandom(2), "big")  # 15 random bits: 3 base32 characters
    return stamp + "".join(_ALPHABET[(noise >> shift) & 31] for shift in (0, 5, 10))


def utcnow() -> str:
    return iso(time.time())


def iso(timestamp: float) -> str:
    moment = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse_iso(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


@dataclass
class Transition:
    state: str
    reason: str
    at: str
    replicas: int | None = None  # an elastic run's size from here on (it shrinks and grows)


@dataclass
class Status:
    """What happened to a run: current state, a human reason, and when each state began."""

    state: str = PENDING
    reason: str = "submitted"
    exit_code: int | None = None
    created_at: str = field(default_factory=utcnow)
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    backend: str = "local"
    user: str | None = None
    sweep: str | None = None
    trial: int | None = None
    pipeline: str | None = None  # the pipeline and step that started this run, if any
    pipeline_step: str | None = None
    parent: str | None = None  # the run whose snapshot this one's code was reopened from
    attempt: int = 0
    restarts: int = 0  # starts again after a preemption or resize (KUBELAB_RESTART_COUNT)
    gpu_ids: list[int] = field(default_factory=list)
    runner_pid: int | None = None
    runner_started: float | None = None
    replicas: list[dict[str, Any]] = field(default_factory=list)
    history: list[Transition] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def move(
        self, state: str, reason: str, exit_code: int | None = None, replicas: int | None = None
    ) -> Status:
        """Enter `state`, stamping its time; terminal states are final."""
        if self.terminal:
            return self
        now = utcnow()
        self.state, self.reason = state, reason
        if exit_code is not None:
            self.exit_code = exit_code
        if state == QUEUED and not self.queued_at:
            self.queued_at = now
        elif state == RUNNING and not self.started_at:
            self.started_at = now
        elif state in TERMINAL:
            self.finished_at = now
        self.history.append(Transition(state, reason, now, replicas))
        return self

    def duration(self) -> float | None:
        if not self.started_at:
            return None
        end = parse_iso(self.finished_at) if self.finished_at else time.time()
        return round(max(0.0, end - parse_iso(self.started_at)), 3)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Status:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["history"] = [Transition(**t) for t in data.get("history", [])]
        return cls(**known)


# A run directory's files and folders: named here only. Code asks RunDirectory for paths;
# the sidebar reads these names as generated TypeScript (labextension/src/vocabulary.ts).
RUN_FILES = {
    "spec": "spec.json",
    "status": "status.json",
    "metrics": "metrics.jsonl",
    "system": "system.jsonl",
    "tracking": "tracking.json",
    "environment": "environment.json",  # Python, packages, GPU driver, image, git commit
    "build": "build.json",  # the environment built for it: definition and key (kubelab.environments)
    "image_build": "image-build.json",  # on a cluster: the image built for it and the build's Job
    "patch": "uncommitted.patch",  # the code folder's changes since its git commit
    "notes": "notes.json",  # tags and a note edited after the run started
    "stop": "stop-requested",
    "code": "code",
    "logs": "logs",
    "tensorboard": "tensorboard",
    "outputs": "outputs",
    "checkpoints": "checkpoints",
    "runner_log": "runner.log",  # in logs/
}


class RunDirectory:
    """One experiment's folder; every reader and writer goes through this class."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.name

    # -- layout ---------------------------------------------------------------------
    @property
    def spec_file(self) -> Path:
        return self.path / RUN_FILES["spec"]

    @property
    def status_file(self) -> Path:
        return self.path / RUN_FILES["status"]

    @property
    def metrics_file(self) -> Path:
        return self.path / RUN_FILES["metrics"]

    @property
    def system_file(self) -> Path:
        """GPU and process samples (kubelab/system_metrics.py), apart from the user's metrics."""
        return self.path / RUN_FILES["system"]

    @property
    def tracking_file(self) -> Path:
        """Params, tags and outputs a trial logged through Polyaxon's tracking client."""
        return self.path / RUN_FILES["tracking"]

    def tracking(self) -> dict[str, Any]:
        """`tracking.json`, checked: only scalar params/outputs and string tags are kept."""
        return checked_tracking(_read_json(self.tracking_file, 1 << 20))

    @property
    def environment_file(self) -> Path:
        return self.path / RUN_FILES["environment"]

    def environment(self) -> dict[str, Any]:
        """`environment.json`, or {} before anything was recorded."""
        data = _read_json(self.environment_file)
        return data if isinstance(data, dict) else {}

    @property
    def patch_file(self) -> Path:
        return self.path / RUN_FILES["patch"]

    @property
    def notes_file(self) -> Path:
        return self.path / RUN_FILES["notes"]

    def notes(self) -> dict[str, Any]:
        """`notes.json`: `tags` (the run's whole tag list, once edited) and `note`, checked."""
        return checked_notes(_read_json(self.notes_file))

    def write_notes(self, notes: dict[str, Any]) -> None:
        _write_json(self.notes_file, notes)

    def write_environment(self, environment: dict[str, Any]) -> None:
        _write_json(self.environment_file, environment)

    @property
    def code_dir(self) -> Path:
        return self.path / RUN_FILES["code"]

    @property
    def logs_dir(self) -> Path:
        return self.path / RUN_FILES["logs"]

    @property
    def tensorboard_dir(self) -> Path:
        return self.path / RUN_FILES["tensorboard"]

    @property
    def checkpoints_dir(self) -> Path:
        """`kubelab.save_checkpoint`'s folder: it outlives every restart of the run."""
        return self.path / RUN_FILES["checkpoints"]

    @property
    def outputs_dir(self) -> Path:
        return self.path / RUN_FILES["outputs"]

    def log_file(self, replica: int = 0, role: str = "worker") -> Path:
        """A replica's output: `logs/replica-N.log` for workers, `logs/ps-N.log` for parameter servers."""
        return self.logs_dir / self.log_name(role, replica)

    @staticmethod
    def log_name(role: str, index: int) -> str:
        return f"replica-{index}.log" if role == "worker" else f"{role}-{index}.log"

    @property
    def runner_log(self) -> Path:
        """What the runner process itself prints (its start-up, a crash)."""
        return self.logs_dir / RUN_FILES["runner_log"]

    @property
    def stop_file(self) -> Path:
        """Present when a stop was asked for, so the runner reports Stopped (or Pruned), not Failed."""
        return self.path / RUN_FILES["stop"]

    def request_stop(self, pruned: bool = False) -> None:
        self.stop_file.write_text("pruned" if pruned else "user")

    def stop_outcome(self) -> tuple[str, str]:
        """The state and reason a stopped run ends in: Pruned by a sweep's early stopping, or Stopped."""
        try:
            pruned = self.stop_file.read_text().strip() == "pruned"
        except FileNotFoundError:
            pruned = False
        if pruned:
            return PRUNED, "pruned by early stopping"
        return STOPPED, "stopped by user"

    # -- lifecycle ------------------------------------------------------------------
    @classmethod
    def create(cls, runs_root: Path, spec: dict[str, Any], status: Status) -> RunDirectory:
        runs_root.mkdir(parents=True, exist_ok=True)
        while True:
            run = cls(runs_root / new_id())
            try:
                run.path.mkdir()
                break
            except FileExistsError:  # same millisecond and same random suffix
                continue
        for folder in (run.logs_dir, run.tensorboard_dir, run.outputs_dir):
            folder.mkdir()
        _write_json(run.spec_file, spec)
        run.write_status(status)
        return run

    def exists(self) -> bool:
        return self.status_file.exists()

    def spec(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec_file.read_text())
        return data

    def status(self) -> Status:
        return Status.from_dict(json.loads(self.status_file.read_text()))

    def write_spec(self, spec: dict[str, Any]) -> None:
        _write_json(self.spec_file, spec)

    def write_status(self, status: Status) -> None:
        _write_json(self.status_file, asdict(status))

    def delete(self) -> None:
        import shutil  # only deletes need it; runners start faster without

        shutil.rmtree(self.path, ignore_errors=True)

    # -- metrics --------------------------------------------------------------------
    def metrics(self) -> Iterator[dict[str, Any]]:
        """Every metrics line, skipping a torn last line a trial is still writing."""
        points: list[dict[str, Any]] = []
        try:
            with self.metrics_file.open() as handle:
                for line in handle:
                    if not line.endswith("\n"):
                        continue
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(entry, dict) and "resume" in entry:
                        points = _before_resume(points, entry["resume"])
                    else:
                        points.append(entry)
        except FileNotFoundError:
            return
        yield from points

    def latest_metrics(self) -> tuple[dict[str, Any], int | None]:
        """The last value of each metric and the last step, as the record shows them."""
        latest, step, _ = self.fold_metrics()
        return latest, step

    def fold_metrics(
        self, offset: int = 0, latest: dict[str, Any] | None = None, step: int | None = None
    ) -> tuple[dict[str, Any], int | None, int]:
        """Fold the metrics lines after byte `offset` into (`latest`, `step`).

        Returns them with the offset of the first byte not yet folded, so a reader that
        keeps those three reads each line once, however long a run reports (a torn last
        line waits for the next call).
        """
        latest = dict(latest or {})
        try:
            with open(self.metrics_file, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return latest, step, offset
        complete = data[: data.rfind(b"\n") + 1]
        for line in complete.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "resume" in entry:  # a preempted run resumes after its checkpoint's step
                resumed = entry["resume"]
                step = resumed if isinstance(resumed, int) and resumed >= 0 else None
                continue
            latest.update(entry.get("metrics", {}))
            if entry.get("step") is not None:
                step = entry["step"]
        return latest, step, offset + len(complete)


def _before_resume(points: list[dict[str, Any]], resumed: Any) -> list[dict[str, Any]]:
    """The points a resumed run keeps: those up to the checkpoint's step (it reports the rest again)."""
    last = resumed if isinstance(resumed, int) else -1
    return [p for p in points if not isinstance(p.get("step"), int) or p["step"] <= last]


def _read_json(path: Path, limit: int = 16 << 20) -> Any:
    try:
        if path.stat().st_size > limit:
            return None
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def summary(
    run: RunDirectory,
    status: Status | None = None,
    spec: dict[str, Any] | None = None,
    metrics: tuple[dict[str, Any], int | None] | None = None,
) -> dict[str, Any]:
    """The record as clients see it (REST, CLI, sidebar, queries): a `run_record.RunRecord`,
    field for field (a test holds them equal); `metrics` is (latest values, last step) when
    the caller already folded them."""
    status = status or run.status()
    spec = spec if spec is not None else run.spec()
    latest, step = metrics if metrics is not None else run.latest_metrics()
    resources = spec.get("resources") or {}
    params = {i["name"]: i.get("default") for i in spec.get("inputs") or [] if i.get("default") is not None}
    params.update(spec.get("params") or {})
    tracked = run.tracking()
    for name, value in (tracked.get("params") or {}).items():
        params.setdefault(name, value)  # logged by the trial; what the spec set wins
    tags = list(dict.fromkeys([*(spec.get("tags") or []), *(tracked.get("tags") or [])]))
    notes = run.notes()
    if "tags" in notes:  # edited with `kubelab tag`: the whole list as the user left it
        tags = notes["tags"]
    return {
        "id": run.id,
        "name": spec.get("name") or run.id,
        "status": status.state,
        "reason": status.reason,
        "exit_code": status.exit_code,
        "created_at": status.created_at,
        "queued_at": status.queued_at,
        "started_at": status.started_at,
        "finished_at": status.finished_at,
        "duration": status.duration(),
        "params": params,
        "tags": tags,
        "description": spec.get("description") or "",
        "note": notes.get("note", ""),
        "parent": status.parent,
        "sweep": status.sweep,
        "trial": status.trial,
        "pipeline": status.pipeline,
        "pipeline_step": status.pipeline_step,
        "metrics": latest,
        "step": step,
        "resources": {
            "gpus": resources.get("gpus", 0),
            "gpu_type": resources.get("gpu_type"),
            "cpu": resources.get("cpu"),
            "memory": resources.get("memory"),
        },
        "gpu_ids": status.gpu_ids,
        "replicas": spec.get("replicas", 1),
        "framework": spec.get("framework", "none"),
        "backend": status.backend,
        "user": status.user,
        "attempt": status.attempt,
        "priority": spec.get("priority", NORMAL_PRIORITY),
        "restarts": status.restarts,
        "system": system_fields(summarize_file(run.system_file)),
    }
