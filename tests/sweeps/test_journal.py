"""The driver's study journal: written through at once, fsynced once per driver turn."""

from __future__ import annotations

import os

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from kubelab.sweeps.journal import GroupCommitBackend


def test_writes_reach_other_readers_before_sync_and_sync_fsyncs_once(tmp_path, monkeypatch):
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
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    backend.sync()
    backend.sync()  # nothing new: no second fsync
    assert len(synced) == 1 and not backend.unsynced
