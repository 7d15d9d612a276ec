"""The sweep driver: one detached process per running sweep, `python -m kubelab.sweeps.driver DIR`.

It keeps `concurrency` trials running: asks the tuner, submits each trial through the
`Experiments` as an ordinary experiment, follows the trials' run directories (status and
metrics) as they change (`file_events`), reports intermediate values to the pruner, stops the
trials it prunes, and tells the tuner each result. Like the local runner, it lives in its
own session, so it outlives the server or CLI that started it.

Restartable by construction (kill it at any instant, start it again):

- the tuner records a suggestion (number and parameters) in the study's journal before
  `ask()` returns: that is the trial's record before its submit;
- the ledger (`state.json`) is written after a turn that changed it, paced by
  `ledger_pause` (the sweep's end, a budget change and a pruning at once), so the study
  and the runs (each names its sweep and trial number) may be ahead of it;
- on start, trials the study has and the ledger lacks are put back, those no run exists
  for are submitted (with their recorded parameters, never re-asked), those with a run
  are followed again (a finished one concluded again from its files), and results the
  tuner missed are told again (telling is idempotent);
- trials the user's stop interrupted run again first, as new trials (the study records each);
- with every slot busy (concurrency > 1), the next trial is asked ahead, off the path from a
  trial's end to the next one's start (it misses the result of the trial ending then, as
  which trial ends first already decides; at concurrency 1 each ask follows the last result).
  One asked and never run (the sweep stopped, or reached a limit) is run by a resumed sweep.

So no trial is lost, none runs twice, and every finished result is kept. The
`KUBELAB_SWEEP_CRASH=point:n` variable makes the driver die (`os._exit`) the n-th time it
reaches `point` (after-ask, before-submit, after-submit, after-tell); tests use it to
check each crash window.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.daemon import start_module
from kubelab.records import RunDirectory
from kubelab.sweeps.file_events import NAMES, FileEvents
from kubelab.sweeps.lineage import checkpoints_of, member_start
from kubelab.sweeps.recovery import recover
from kubelab.sweeps.store import (
    ACTIVE,
    COMPLETE,
    FAILED,
    INTERRUPTED,
    PRUNED,
    PRUNING,
    RUNNING,
    STOPPED,
    SUBMITTING,
    TRIAL_FAILED,
    TRIAL_STOPPED,
    SweepDirectory,
    SweepState,
    TrialEntry,
    ledger_pause,
)
from kubelab.sweeps.sweep_end import limits_reached, outcome
from kubelab.sweeps.trial_metrics import Follow, new_points, trial_result

if TYPE_CHECKING:
    from kubelab.sweeps.tuners import Suggestion  # imports Optuna: only once the driver runs

POLL = 0.02  # seconds between looks at the running trials' files
FAST_POLL, FAST_FOR = 0.002, 1.0  # looks (only stat calls) this often for a second after a change
EVENT_WAIT = 0.1  # seconds between looks when file events (inotify) wake the driver at changes
RECONCILE_EVERY = 1.0  # seconds between asking the backend about a quiet trial
STOP_WAIT = 15.0  # extra seconds to wait for stopped trials, beyond the stop grace
TUNER_STATE = {COMPLETE: "complete", TRIAL_FAILED: "failed", PRUNED: "pruned", TRIAL_STOPPED: "failed"}
TUNER_STATE[INTERRUPTED] = "failed"
EARLY_WAIT = 5.0  # seconds `launch` waits for a driver still importing before starting a cold one


def launch(sweep: SweepDirectory) -> int:
    """Hand `sweep` to a warm driver (`kubelab.warm`; one still importing is waited for, a cold
    one would import Optuna again), else start a detached cold one; its pid. No replacement
    is started here (a server's `SweepWatcher.keep_warm` does): it would import Optuna on the
    cores the first trials need. A second driver for the same sweep exits at once."""
    from kubelab.warm import DRIVER, WarmPool

    pid = WarmPool(sweep.home, DRIVER).hand_over(sweep.path, wait=EARLY_WAIT) if DRIVER.size() else None
    if pid is None:
        pid = start_module("kubelab.sweeps.driver", str(sweep.path), sweep.log_file).pid
    return pid


# -- as a warm helper (kubelab.warm) ------------------------------------------------------------------
def preload() -> None:
    """What a driver needs before its first trial: Optuna's import above all (~0.2 s), and a
    throwaway ask() for the imports Optuna defers to first use (numpy.random, samplers)."""
    import optuna

    import kubelab.experiments
    import kubelab.formats.nni_config
    import kubelab.sweeps.journal
    import kubelab.sweeps.sweep_spec
    import kubelab.sweeps.tuners  # noqa: F401
    from kubelab.backends.registry import preload as preload_backend

    preload_backend()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0)).ask().suggest_float("x", 0, 1)


def log_of(path: Path) -> Path:
    return SweepDirectory(path).log_file


def serve(path: Path) -> bool:
    """Drive one sweep in this warm process; a driver is never reused (a sweep can last days)."""
    Driver(SweepDirectory(path)).main()
    return False


class Driver:
    def __init__(self, sweep: SweepDirectory):
        self.sweep = sweep
        self.follows: dict[int, Follow] = {}
        self.exhausted: bool | str = False  # a string: why the tuner cannot go on (the sweep fails)
        self.interrupting = False  # the user stopped the sweep: its trials that end Stopped rerun later
        self.to_rerun: list[int] = []  # interrupted trials not yet run again, first on resume
        self.ahead: Suggestion | None = None  # the next trial, asked while every slot is busy
        self.hits: Counter[str] = Counter()
        self.state = SweepState()
        self.dirty = False  # the ledger has changes not yet written
        self.changed_at = 0.0  # monotonic time of the last submit or trial status change
        self.save_after = 0.0  # monotonic time before which a dirty ledger waits (ledger_pause)
        self.events = FileEvents()  # wake-ups at the trials' and the sweep's changes
        self.watched = self.events.watch(sweep.path, NAMES)  # stop and budget requests

    # -- the process ------------------------------------------------------------------
    def main(self) -> int:
        with self.sweep.driver_lock() as mine:
            if not mine:
                return 0  # another driver holds this sweep
            with self.sweep.state_lock():
                self.state = self.sweep.read_state()
                if self.state.status != RUNNING:
                    return 0
                from kubelab.pids import process_start_time

                self.state.driver_pid = os.getpid()
                self.state.driver_started = process_start_time(os.getpid())
                self.state.reason = "running"
                self.save()
            try:
                self.prepare()
                self.loop()
            except Exception as exc:  # a sweep must always end with a status and a reason
                traceback.print_exc()
                self.finish(FAILED, f"sweep driver error: {exc}", stop_trials=True)
            finally:
                self.events.close()
        return 0

    def prepare(self) -> None:
        import warnings

        from kubelab.experiments import Experiments

        self.lab = Experiments(self.sweep.home, user=self.state.user)
        self.lab.backend.warm_up(self.lab.home)  # runners get ready for the first trials while Optuna imports

        import optuna

        from kubelab.sweeps.sweep_spec import SweepSpec

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # Re-reading a trial's metrics after a restart reports steps Optuna already has; it
        # warns and ignores them, which is what we want without the noise.
        warnings.simplefilter("ignore")
        self.spec = SweepSpec.parse(self.sweep.spec_data())
        self.metric = self.spec.objective.metric
        from kubelab.sweeps.journal import GroupCommitBackend

        self.journal = GroupCommitBackend(str(self.sweep.study_file))
        storage = self.sweep.storage(self.journal)
        self.tuner = self.spec.make_tuner(storage=storage, study_name=self.sweep.id)
        if self.spec.tuner.kind.walks == "population":  # PBT: members go on from checkpoints
            self.tuner.locate = checkpoints_of(self)
        self.report_steps = self.spec.early_stopping.name != "none"
        recover(self)

    def save(self) -> None:
        self.sync_study()  # the ledger never records what the study could still lose
        started = time.monotonic()
        self.sweep.write_state(self.state)
        self.dirty = False
        self.save_after = started + ledger_pause(time.monotonic() - started)

    def sync_study(self) -> None:
        """fsync the study's journal: before any submit and any ledger write (group commit)."""
        journal = getattr(self, "journal", None)
        if journal is not None:
            journal.sync()

    def crash_point(self, point: str) -> None:
        """Fault injection for the restart tests (see the module docstring)."""
        wanted = os.environ.get("KUBELAB_SWEEP_CRASH", "")
        name, _, count = wanted.partition(":")
        if name == point:
            self.hits[point] += 1
            if self.hits[point] == int(count or 1):
                os._exit(137)

    # -- the loop -------------------------------------------------------------------------
    def loop(self) -> None:
        while True:
            if self.sweep.stop_requested():
                self.interrupting = True
                self.finish(STOPPED, "stopped by user", stop_trials=True)
                return
            if self.sweep.budget_file.exists():
                self.apply_budget(self.sweep.claim_budget())
            for follow in list(self.follows.values()):
                self.check(follow)
            verdict = self.verdict()
            if verdict is not None:
                self.finish(*verdict)
                return
            while len(self.follows) < self.spec.concurrency and self.may_start():
                if not self.start_trial():
                    break  # the tuner has nothing yet (PBT waits for its generation)
            if self.dirty and time.monotonic() >= self.save_after:  # this turn's results and submits
                self.save()
            if self.ahead is None and not self.to_rerun and self.may_ask_ahead():
                self.ahead = self.ask()
            if self.watched:  # every followed folder reports its changes: sleep until one does
                self.events.wait(EVENT_WAIT)
            else:
                time.sleep(FAST_POLL if time.monotonic() - self.changed_at < FAST_FOR else POLL)

    def apply_budget(self, budget: dict[str, Any]) -> None:
        for key, value in budget.items():
            if key in ("max_trials", "max_duration", "max_failed_trials"):
                setattr(self.state, key, value)
        self.save()

    def may_start(self) -> bool:
        state = self.state
        if self.exhausted and not self.to_rerun and self.ahead is None:
            return False
        if state.max_trials is not None and state.counted() >= state.max_trials:
            return False
        return not (state.max_duration is not None and state.seconds() >= state.max_duration)

    def may_ask_ahead(self) -> bool:
        """Every slot busy, each trial past its start (the ask would slow that down), and room
        for one more trial."""
        busy = 1 < self.spec.concurrency <= len(self.follows)
        return busy and all(f.started for f in self.follows.values()) and self.may_start()

    def start_trial(self) -> bool:
        if self.to_rerun:
            suggestion = self.tuner.rerun(self.to_rerun.pop(0))
        else:
            suggestion, self.ahead = self.ahead or self.ask(), None
        if suggestion is not None:
            s = suggestion
            self.submit(TrialEntry(s.number, dict(s.flat), s.params, lineage=s.lineage))
        return suggestion is not None

    def ask(self) -> Suggestion | None:
        """The tuner's next Suggestion (recorded in the study), or None once it has none left."""
        from kubelab.sweeps.tuners import NothingYet, SweepExhausted

        try:
            suggestion: Suggestion = self.tuner.ask()
        except NothingYet:  # PBT between generations: asked again at the next turn
            return None
        except SweepExhausted as exc:
            self.exhausted = exc.message() if exc.fails_sweep else True
            return None
        self.crash_point("after-ask")
        return suggestion

    def submit(self, entry: TrialEntry) -> None:
        from kubelab.errors import KubelabError

        # No ledger write before the submit: the study already holds this trial and its
        # parameters, and recovery submits a trial the study has and no run exists for.
        entry.state, entry.run_id = SUBMITTING, None
        self.state.put(entry)
        self.dirty = True
        self.crash_point("before-submit")
        try:
            spec = self.spec.trial_spec(entry.params)
            spec.env["KUBELAB_NNI_PARAMS"] = json.dumps(entry.nni_params)
            checkpoint = member_start(self, entry, spec)  # a PBT member's: its parent's
            self.sync_study()  # the suggestion is durable before its run exists
            record = self.lab.submit(
                spec,
                base_dir=Path(self.state.base_dir),
                confine=self.state.confine,
                sweep=self.sweep.id,
                trial=entry.number,
                pipeline=self.state.pipeline,
                pipeline_step=self.state.pipeline_step,
                checkpoint=checkpoint,
            )
        except KubelabError as exc:
            reason = exc.message().replace("\n", ";")
            self.conclude(entry, TRIAL_FAILED, None, f"trial {entry.number} could not start: {reason}")
            return
        self.crash_point("after-submit")
        entry.run_id, entry.state = record["id"], ACTIVE
        self.dirty = True
        self.changed_at = time.monotonic()
        self.follow(entry)

    def follow(self, entry: TrialEntry) -> None:
        assert entry.run_id is not None
        self.follows[entry.number] = Follow(entry, RunDirectory(self.lab.runs_root / entry.run_id))
        self.watched = self.events.watch(self.lab.runs_root / entry.run_id) and self.watched

    # -- one trial ------------------------------------------------------------------------
    def check(self, follow: Follow) -> None:
        """Look at a trial's status, then its new metrics (a finished run's are all on disk)."""
        run = follow.run
        try:
            stamp = run.status_file.stat().st_mtime_ns
        except FileNotFoundError:  # the run was deleted under us
            self.conclude(follow.entry, TRIAL_FAILED, None, f"trial {follow.entry.number}'s run was deleted")
            return
        now = time.monotonic()
        status = None
        if stamp != follow.status_stamp:
            follow.status_stamp, follow.checked_at = stamp, now
            self.changed_at = now
            status = run.status()
            follow.started = status.started_at is not None or status.terminal
        elif now - follow.checked_at > RECONCILE_EVERY:
            follow.checked_at = now
            status = self.lab.backend.reconcile(run, run.status())  # a runner that died unseen
        self.read_metrics(follow)
        if status is not None and status.terminal:
            self.ended(follow, status)

    def read_metrics(self, follow: Follow) -> None:
        for point in new_points(follow):
            metrics = point.get("metrics") or {}
            follow.metrics_seen |= set(metrics)
            value = metrics.get(self.metric)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            follow.last_value = value
            step = point.get("step")
            if self.report_steps and not point.get("final") and isinstance(step, int) and step >= 0:
                self.report(follow, step, value)

    def report(self, follow: Follow, step: int, value: float) -> None:
        from kubelab.errors import KubelabError

        if follow.entry.state != ACTIVE or not math.isfinite(value):
            return
        try:
            prune = self.tuner.report(follow.entry.number, step, value)
        except KubelabError:
            return
        if prune:
            follow.entry.state = PRUNING
            follow.entry.reason = f"pruned at step {step} ({self.metric}={value:.6g})"
            self.save()
            if follow.entry.run_id is not None:
                self.lab.stop(follow.entry.run_id, pruned=True)

    def ended(self, follow: Follow, status: Any) -> None:
        self.conclude(follow.entry, *trial_result(follow, status, self.metric))

    def conclude(self, entry: TrialEntry, state: str, value: float | None, reason: str) -> None:
        """Record a trial's end: the tuner first, then the ledger (recovery re-tells if we die between)."""
        if self.interrupting and state == TRIAL_STOPPED:
            state, reason = INTERRUPTED, f"trial {entry.number} was interrupted by the sweep's stop"
        entry.state, entry.value, entry.reason = state, value, reason
        self.tell(entry)
        self.crash_point("after-tell")
        if self.follows.pop(entry.number, None) is not None and entry.run_id is not None:
            self.events.unwatch(self.lab.runs_root / entry.run_id)
        self.state.put(entry)
        self.dirty = True  # written at the end of this turn, with the next trial's submit

    def tell(self, entry: TrialEntry) -> None:
        from kubelab.errors import Conflict

        # Conflict: the study already holds another ending for it; the ledger keeps ours.
        with contextlib.suppress(Conflict):
            self.tuner.tell(entry.number, entry.value, TUNER_STATE[entry.state])

    # -- the end --------------------------------------------------------------------------
    def verdict(self) -> tuple[str | None, str, bool] | None:
        """(status, reason, stop running trials) once the sweep is over, else None.

        A None status means "judge by the results", once the running trials are stopped.
        """
        over = limits_reached(self.state, self.spec, self.metric)
        if over is not None:
            return over
        if self.follows or self.may_start():
            return None
        if isinstance(self.exhausted, str):
            return FAILED, self.exhausted, False
        if self.exhausted:
            return None, f"the {self.spec.tuner.name} tuner tried every configuration", False
        return None, f"ran max_trials ({self.state.max_trials}) trials", False

    def finish(self, status: str | None, reason: str, stop_trials: bool = False) -> None:
        if stop_trials and self.follows:
            self.stop_all()
        if status is None:
            status, reason = outcome(self.state, reason, self.metric)
        self.state.finish(status, reason)
        self.sweep.clear_stop()
        self.save()

    def stop_all(self) -> None:
        """Stop every running trial and wait (bounded) to record how each ended."""
        for follow in list(self.follows.values()):
            try:
                if follow.entry.run_id is not None:
                    self.lab.stop(follow.entry.run_id)
            except Exception:  # one trial's stop failing must not keep the others running
                traceback.print_exc()
        deadline = time.monotonic() + self.lab.backend.stop_grace() + STOP_WAIT
        while self.follows and time.monotonic() < deadline:
            for follow in list(self.follows.values()):
                self.check(follow)
            time.sleep(POLL)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kubelab.sweeps.driver SWEEP_DIR", file=sys.stderr)
        return 2
    return Driver(SweepDirectory(Path(args[0]))).main()


if __name__ == "__main__":
    sys.exit(main())
