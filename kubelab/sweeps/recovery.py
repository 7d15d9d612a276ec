"""What a sweep driver does when it starts: re-attach to every trial the ledger or the study
knows, put back what the ledger missed, and submit what never got a run (`driver.py`'s
module docstring says why each step keeps "no trial lost, none run twice"). The last trial
asked and never submitted (a crash after its ask, or one asked ahead when the sweep stopped)
goes back to being the next one asked, so interrupted trials still run again first."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kubelab.sweeps.store import ACTIVE, SUBMITTING, TRIAL_FAILED, TrialEntry, trial_runs

if TYPE_CHECKING:
    from kubelab.sweeps.driver import Driver


def recover(driver: Driver) -> None:
    """Re-attach to every trial the ledger or the study knows; submit those never submitted."""
    runs = functools.cache(lambda: trial_runs(driver.lab.runs_root, driver.sweep.id))  # read at most once
    in_study = {s.number: s for s in driver.tuner.running()}
    for number, suggestion in in_study.items():
        if driver.state.entry(number) is not None:
            continue
        if runs().get(number) is None and number == max(in_study):
            driver.ahead = suggestion  # asked, never submitted: the next trial, after any reruns
        else:
            flat, params = dict(suggestion.flat), suggestion.params
            driver.state.put(TrialEntry(number, flat, params, lineage=suggestion.lineage))
    for summary in driver.tuner.trials():  # ended in the study after the ledger's last write
        missed = summary.number not in in_study and driver.state.entry(summary.number) is None
        if missed and summary.params is not None:
            readmit(driver, summary.number, runs().get(summary.number))
    done = driver.tuner.reruns()  # the study records a rerun before its trial exists
    driver.to_rerun = [n for n in driver.state.interrupted() if n not in done]
    for entry in driver.state.entries():
        if entry.final:
            if entry.number in in_study:
                driver.tell(entry)  # the tuner missed this result
            continue
        if entry.run_id is None:
            entry.run_id = runs().get(entry.number)
        if entry.run_id is None:
            driver.submit(entry)
        else:
            if entry.state == SUBMITTING:
                entry.state = ACTIVE
            driver.follow(entry)
    driver.save()


def readmit(driver: Driver, number: int, run_id: str | None) -> None:
    """Put back a trial the study ended and the ledger never heard of: with a run, to be
    followed (its end is read again from its files); without one, it could not start."""
    suggestion = driver.tuner.suggestion(number)
    entry = TrialEntry(number, dict(suggestion.flat), suggestion.params, ACTIVE, run_id)
    entry.lineage = suggestion.lineage
    if run_id is None:
        entry.state, entry.reason = TRIAL_FAILED, f"trial {number} ended without a run"
    driver.state.put(entry)
