"""The wake-ups a sweep's driver and `kubelab sweep --wait` sleep on (kubelab.sweeps.file_events):
a watched folder's change ends a wait at once, what the mask leaves out does not, and where
nothing can be watched a wait is a plain sleep of its timeout."""

from __future__ import annotations

import os
from pathlib import Path

from kubelab.sweeps.file_events import NAMES, FileEvents


def test_a_replaced_file_ends_the_wait_and_the_events_are_drained(tmp_path: Path) -> None:
    with FileEvents() as events:
        assert events.watch(tmp_path)
        (tmp_path / ".state.json.tmp").write_text("{}")
        os.replace(tmp_path / ".state.json.tmp", tmp_path / "state.json")
        assert events.wait(30.0)  # returns at once: the change is already queued
        assert not events.wait(0.0)  # drained: nothing left to wake on


def test_a_names_watch_ignores_appends_but_sees_new_files(tmp_path: Path) -> None:
    journal = tmp_path / "study.journal"
    journal.write_text("")
    with FileEvents() as events:
        assert events.watch(tmp_path, NAMES)
        with journal.open("a") as handle:
            handle.write("a line\n")
        assert not events.wait(0.0)
        (tmp_path / "stop-requested").write_text("now")
        assert events.wait(30.0)


def test_an_unwatched_folder_no_longer_wakes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    with FileEvents() as events:
        assert events.watch(tmp_path, NAMES) and events.watch(run)
        events.unwatch(run)
        events.wait(0.0)  # removing a watch queues one last event of its own (IN_IGNORED)
        (run / "metrics.jsonl").write_text("{}\n")
        assert not events.wait(0.0)


def test_what_cannot_be_watched_says_so(tmp_path: Path) -> None:
    with FileEvents() as events:
        assert not events.watch(tmp_path / "missing")
        assert not events.wait(0.0)  # nothing watched: a sleep of the timeout
    closed = FileEvents()
    closed.close()
    assert not closed.watch(tmp_path)
