"""The sweep record: `$KUBELAB_HOME/sweeps/<id>/`, the files every entry point shares.

- `sweep.json`: the validated sweep spec (`SweepSpec.to_dict()`, the space inline).
- `state.json`: status, budget, and the ledger of trials (trial number → run id, state,
  parameters, result). Written atomically, and only by whoever holds the sweep: its
  driver while one lives, else a controller holding `state.lock` (see `SweepDirectory`).
- `study.journal`: the tuner's Optuna study, in Optuna's journal file storage. Not SQLite:
  opening an RDB storage imports SQLAlchemy and alembic and stamps the schema, 1-2.5 s at
  every driver start (and in the server for importance), where the journal opens in
  ~0.07 s. It is append-only and every write reaches the kernel at once, so a killed
  driver loses nothing; the driver fsyncs it before each submit and ledger write
  (`kubelab.sweeps.journal`), so a power loss cannot take what a run or the ledger knows.
- `driver.lock`: flock'ed by the live driver for its whole life. The kernel drops the lock
  when the process dies, even by SIGKILL, so "is a driver alive?" never trusts a stale pid.
- `stop-requested`, `budget.json`: requests from controllers to a live driver.
- `driver.log`: the driver's own output.

Trials themselves are ordinary run directories whose status names the sweep and trial.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab.records import utcnow

RUNNING, SUCCEEDED, FAILED, STOPPED = "Running", "Succeeded", "Failed", "Stopped"
SWEEP_STATES = (RUNNING, SUCCEEDED, FAILED, STOPPED)

# A trial's place in the ledger. `submitting` is written before the run exists, so a
# crash between asking the tuner and submitting never loses or doubles a trial.
SUBMITTING, ACTIVE, PRUNING = "submitting", "running", "pruning"
COMPLETE, TRIAL_FAILED, PRUNED, TRIAL_STOPPED = "complete", "failed", "pruned", "stopped"
TRIAL_FINAL = frozenset({COMPLETE, TRIAL_FAILED, PRUNED, TRIAL_STOPPED})
BUDGET_FIELDS = ("max_trials", "max_duration", "max_failed_trials")


@dataclass
class TrialEntry:
    number: int
    params: dict[str, Any]  # flat, as the command line and KUBELAB_PARAMS see them
    nni_params: dict[str, Any]  # NNI-shaped (nested choices as {"_name": ...})
    state: str = SUBMITTING
    run_id: str | None = None
    value: float | None = None
    reason: str = ""

    @property
    def final(self) -> bool:
        return self.state in TRIAL_FINAL


@dataclass
class SweepState:
    status: str = RUNNING
    reason: str = "starting"
    created_at: str = field(default_factory=utcnow)
    finished_at: str | None = None
    user: str | None = None
    base_dir: str = ""
    confine: bool = False
    max_trials: int | None = None
    max_duration: float | None = None
    max_failed_trials: int | None = None
    elapsed: float = 0.0  # seconds spent Running in earlier segments (before a stop or end)
    running_since: float | None = None  # wall clock when the current Running segment began
    driver_pid: int | None = None
    driver_started: float | None = None
    pipeline: str | None = None  # the pipeline and step that started this sweep, if any
    pipeline_step: str | None = None
    trials: dict[str, TrialEntry] = field(default_factory=dict)

    def seconds(self, now: float | None = None) -> float:
        """Time the sweep has been Running; a dead driver's trials kept running, so it counts."""
        current = (now or time.time()) - self.running_since if self.running_since else 0.0
        return self.elapsed + max(0.0, current)

    def entry(self, number: int) -> TrialEntry | None:
        return self.trials.get(str(number))

    def put(self, entry: TrialEntry) -> None:
        self.trials[str(entry.number)] = entry

    def entries(self) -> list[TrialEntry]:
        return sorted(self.trials.values(), key=lambda e: e.number)

    def finish(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason
        self.finished_at = utcnow()
        self.elapsed = self.seconds()
        self.running_since = None
        self.driver_pid = self.driver_started = None

    def restart(self, reason: str) -> None:
        self.status, self.reason, self.finished_at = RUNNING, reason, None
        self.running_since = time.time()

    def to_dict(self) -> dict[str, Any]:
        # Shallow copies, not `asdict`'s deep walk: the driver writes this once per trial turn.
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["trials"] = {k: dict(vars(v)) for k, v in self.trials.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepState:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["trials"] = {k: TrialEntry(**v) for k, v in (data.get("trials") or {}).items()}
        return cls(**known)


class SweepDirectory:
    """One sweep's folder; every reader and writer of sweep files goes through this class."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.name

    @property
    def home(self) -> Path:
        return self.path.parent.parent

    @property
    def spec_file(self) -> Path:
        return self.path / "sweep.json"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def study_file(self) -> Path:
        return self.path / "study.journal"

    def storage(self, backend: Any = None) -> Any:
        """The Optuna storage holding this sweep's study (imports Optuna).

        The driver passes a `GroupCommitBackend` (see `kubelab.sweeps.journal`).
        """
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        return JournalStorage(backend or JournalFileBackend(str(self.study_file)))

    @property
    def stop_file(self) -> Path:
        return self.path / "stop-requested"

    @property
    def budget_file(self) -> Path:
        return self.path / "budget.json"

    @property
    def log_file(self) -> Path:
        return self.path / "driver.log"

    def exists(self) -> bool:
        return self.state_file.exists()

    def spec_data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec_file.read_text())
        return data

    def read_state(self) -> SweepState:
        return SweepState.from_dict(json.loads(self.state_file.read_text()))

    def write_state(self, state: SweepState) -> None:
        write_json(self.state_file, state.to_dict(), indent=None)  # compact: C encoder, fast

    def state_mtime(self) -> int | None:
        try:
            return self.state_file.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    # -- locks ----------------------------------------------------------------------
    @contextlib.contextmanager
    def driver_lock(self) -> Iterator[bool]:
        """Held by the live driver; yields False when another process holds it."""
        with _flock(self.path / "driver.lock", blocking=False) as got:
            yield got

    @contextlib.contextmanager
    def state_lock(self) -> Iterator[None]:
        """Held briefly by anyone who decides, from state.json, whether to write it."""
        with _flock(self.path / "state.lock", blocking=True):
            yield

    def driver_alive(self) -> bool:
        with self.driver_lock() as free:
            return not free

    # -- requests to a live driver ----------------------------------------------------
    def request_stop(self) -> None:
        self.stop_file.write_text(utcnow())

    def stop_requested(self) -> bool:
        return self.stop_file.exists()

    def clear_stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.stop_file.unlink()

    def request_budget(self, budget: dict[str, Any]) -> None:
        pending = self.pending_budget()
        write_json(self.budget_file, {**pending, **budget})

    def pending_budget(self) -> dict[str, Any]:
        try:
            pending: dict[str, Any] = json.loads(self.budget_file.read_text())
            return pending
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def claim_budget(self) -> dict[str, Any]:
        """Take a pending budget change (rename first, so a newer request is never lost)."""
        claimed = self.path / f".budget.{os.getpid()}.claimed"
        try:
            os.replace(self.budget_file, claimed)
        except FileNotFoundError:
            return {}
        try:
            taken: dict[str, Any] = json.loads(claimed.read_text())
            return taken
        except json.JSONDecodeError:
            return {}
        finally:
            claimed.unlink()


class SweepStore:
    """All sweeps under `$KUBELAB_HOME/sweeps/`."""

    def __init__(self, home: Path):
        self.root = Path(home) / "sweeps"

    def sweep(self, sweep_id: str) -> SweepDirectory:
        return SweepDirectory(self.root / sweep_id)

    def all(self) -> list[SweepDirectory]:
        try:
            names = sorted(os.listdir(self.root), reverse=True)  # ids sort by creation time
        except FileNotFoundError:
            return []
        return [s for s in (self.sweep(n) for n in names if not n.startswith(".")) if s.exists()]


def write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=str))
    os.replace(tmp, path)


@contextlib.contextmanager
def _flock(path: Path, blocking: bool) -> Iterator[bool]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
