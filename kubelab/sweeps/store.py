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
- `driver.lock`, `state.lock`, `stop-requested`, `driver.log`: as every driver's folder
  (`kubelab.driver_store`); `budget.json`: a controller's budget change for a live driver.

Trials themselves are ordinary run directories whose status names the sweep and trial.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kubelab.driver_store import FAILED as FAILED
from kubelab.driver_store import RUNNING as RUNNING
from kubelab.driver_store import STOPPED as STOPPED
from kubelab.driver_store import SUCCEEDED as SUCCEEDED
from kubelab.driver_store import DriverDirectory, DriverLedger, DriverStore, write_json
from kubelab.records import RunDirectory, utcnow

SWEEP_STATES = (RUNNING, SUCCEEDED, FAILED, STOPPED)

# A trial's place in the ledger. `submitting` is written before the run exists, so a
# crash between asking the tuner and submitting never loses or doubles a trial.
SUBMITTING, ACTIVE, PRUNING = "submitting", "running", "pruning"
COMPLETE, TRIAL_FAILED, PRUNED, TRIAL_STOPPED = "complete", "failed", "pruned", "stopped"
# Stopped by the sweep's own stop: not counted toward max_trials, and run again (as a new
# trial with the same parameters) when the sweep is resumed.
INTERRUPTED = "interrupted"
TRIAL_FINAL = frozenset({COMPLETE, TRIAL_FAILED, PRUNED, TRIAL_STOPPED, INTERRUPTED})
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
    lineage: dict[str, Any] | None = None  # a PBT member's generation and parent (pbt_tuner.py)

    @property
    def final(self) -> bool:
        return self.state in TRIAL_FINAL


@dataclass
class SweepState(DriverLedger):
    ENTRIES: ClassVar[str] = "trials"
    ENTRY: ClassVar[type] = TrialEntry

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

    def interrupted(self) -> list[int]:
        return [e.number for e in self.entries() if e.state == INTERRUPTED]

    def counted(self) -> int:
        """Trials that count toward `max_trials`: all but those the sweep's stop interrupted."""
        return sum(1 for e in self.trials.values() if e.state != INTERRUPTED)

    def finish(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason
        self.finished_at = utcnow()
        self.elapsed = self.seconds()
        self.running_since = None
        self.driver_pid = self.driver_started = None

    def restart(self, reason: str) -> None:
        self.status, self.reason, self.finished_at = RUNNING, reason, None
        self.running_since = time.time()


LEDGER_SHARE = 0.05  # at most this share of a driver's time goes to rewriting state.json
LEDGER_EVERY, LEDGER_AT_MOST = 0.05, 0.25  # seconds between two writes while trials run


def ledger_pause(took: float) -> float:
    """Seconds a driver waits after a ledger write that `took` seconds before the next one.

    The ledger is rewritten whole, O(trials): written at every trial's end it was a sweep
    driver's largest cost after the tuner's ask (~4.5 ms at 200 trials, ~20 at 1,000). Viewers
    see it at most `LEDGER_AT_MOST` late, and at least `KUBELAB_SWEEP_LEDGER_EVERY` seconds
    pass between writes (tests set it long to leave the ledger behind).
    """
    try:
        least = max(0.0, float(os.environ.get("KUBELAB_SWEEP_LEDGER_EVERY", LEDGER_EVERY)))
    except ValueError:
        least = LEDGER_EVERY
    return max(min(took / LEDGER_SHARE, LEDGER_AT_MOST), least)


def trial_runs(runs_root: Path, sweep_id: str) -> dict[int, str]:
    """Trial number → run id, from the run directories (the truth a crash cannot lose)."""
    found: dict[int, str] = {}
    for path in runs_root.iterdir():
        try:
            status = json.loads(RunDirectory(path).status_file.read_text())
        except (OSError, ValueError):
            continue
        if status.get("sweep") == sweep_id and status.get("trial") is not None:
            found.setdefault(int(status["trial"]), path.name)
    return found


class SweepDirectory(DriverDirectory):
    """One sweep's folder; every reader and writer of sweep files goes through this class."""

    spec_name = "sweep.json"

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
    def budget_file(self) -> Path:
        return self.path / "budget.json"

    def read_state(self) -> SweepState:
        return SweepState.from_dict(self.state_data())

    def write_state(self, state: SweepState) -> None:
        write_json(self.state_file, state.to_dict(), indent=None)  # compact: C encoder, fast

    # -- budget requests to a live driver ---------------------------------------------
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


class SweepStore(DriverStore[SweepDirectory]):
    """All sweeps under `$KUBELAB_HOME/sweeps/`."""

    def __init__(self, home: Path):
        super().__init__(home, "sweeps", SweepDirectory)

    def sweep(self, sweep_id: str) -> SweepDirectory:
        return self.item(sweep_id)
