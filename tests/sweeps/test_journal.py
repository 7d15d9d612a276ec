"""The driver's study journal: written through at once, fsynced once per driver turn."""

from __future__ import annotations

import os
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from kubelab.sweeps.journal import GroupCommitBackend


def test_writes_reach_other_readers_before_sync_and_sync_fsyncs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = str(tmp_path / "study.journal")
    backend = GroupCommitBackend(path)
    study = optuna.create_study(storage=JournalStorage(backend), study_name="s")
    trial = study.ask()
    trial.suggest_float("x", 0, 1)
    study.tell(trial, 0.5)
    assert backend.unsynced
    # Another process (a restarted driver, the server) reads everything already.
    other = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(path)))
    assert [(t.state.name, t.value) for t in other.trials] == [("COMPLETE", 0.5)]

    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    backend.sync()
    backend.sync()  # nothing new: no second fsync
    assert len(synced) == 1 and not backend.unsynced


def test_the_one_writer_reads_from_memory_what_the_file_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    path = str(tmp_path / "study.journal")
    first = optuna.create_study(storage=JournalStorage(GroupCommitBackend(path)), study_name="s")
    first.tell(first.ask({"x": optuna.distributions.FloatDistribution(0, 1)}), 0.25)

    backend = GroupCommitBackend(path)  # a restarted driver: reads the file once, here
    monkeypatch.setattr(JournalFileBackend, "read_logs", lambda *_: (_ for _ in ()).throw(AssertionError))
    study = optuna.load_study(study_name="s", storage=JournalStorage(backend))
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    study.tell(trial, 0.75)
    assert [t.value for t in study.get_trials()] == [0.25, 0.75]
    monkeypatch.undo()
    # The file holds what the writer's memory does, for the server and later drivers.
    again = optuna.load_study(study_name="s", storage=JournalStorage(JournalFileBackend(path)))
    assert [(t.number, t.value, t.params) for t in again.trials] == [
        (t.number, t.value, t.params) for t in study.trials
    ]
