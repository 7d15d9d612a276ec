"""The index is a cache: deleting it, or its run directories changing, loses nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubelab.index import RunIndex
from kubelab.records import SUCCEEDED, RunDirectory, Status, summary


def entry(index: RunIndex, run_id: str) -> dict[str, Any]:
    found = index.get(run_id)
    assert found is not None
    return found


def make_run(root: Path, name: str, state: str = SUCCEEDED) -> RunDirectory:
    status = Status()
    status.move(state, "done", 0)
    return RunDirectory.create(root, {"name": name, "command": ["true"]}, status)


def test_rebuilds_from_run_directories(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    runs = [make_run(root, f"r{i}") for i in range(3)]
    index = RunIndex(root)
    changes = index.refresh()
    assert sorted(r["name"] for r in changes.updated) == ["r0", "r1", "r2"]
    index.save()
    assert not RunIndex(root).refresh()  # loaded from the cache: nothing to re-read
    runs[0].delete()
    again = RunIndex(root)
    assert again.refresh().deleted == [runs[0].id]
    index.cache_file.unlink()
    rebuilt = RunIndex(root)
    rebuilt.refresh()
    assert sorted(r["name"] for r in rebuilt.records()) == ["r1", "r2"]


def test_unfinished_runs_are_reread_when_their_files_change(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = RunDirectory.create(root, {"name": "live", "command": ["true"]}, Status())
    index = RunIndex(root)
    index.refresh()
    with open(run.metrics_file, "a") as handle:
        handle.write('{"step": 1, "metrics": {"loss": 0.5}}\n')
    changed = index.refresh().updated
    assert [r["metrics"] for r in changed] == [{"loss": 0.5}]
    assert not index.refresh()


def test_a_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root, "x")
    (tmp_path / "index.marshal").write_bytes(b"garbage")
    index = RunIndex(root)
    index.refresh()
    assert [r["name"] for r in index.records()] == ["x"]


def test_metrics_are_folded_incrementally_and_torn_lines_wait(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = RunDirectory.create(root, {"name": "live", "command": ["true"]}, Status())
    index = RunIndex(root)
    with open(run.metrics_file, "a") as handle:
        handle.write('{"step": 1, "metrics": {"loss": 0.5, "acc": 0.1}}\n{"step": 2, "metr')
    index.refresh()
    assert (entry(index, run.id)["metrics"], entry(index, run.id)["step"]) == ({"loss": 0.5, "acc": 0.1}, 1)
    folded = index.entries[run.id][2]
    with open(run.metrics_file, "a") as handle:
        handle.write('ics": {"loss": 0.25}}\n')
    index.refresh()
    assert entry(index, run.id)["metrics"] == {"loss": 0.25, "acc": 0.1} and entry(index, run.id)["step"] == 2
    assert index.entries[run.id][2] == run.metrics_file.stat().st_size > folded
    assert entry(index, run.id)["metrics"] == summary(run)["metrics"]  # same as a full read


def test_a_run_listed_before_its_status_was_written_is_found_once_it_is(tmp_path: Path) -> None:
    """A refresh between a run's mkdir and its status file (code being copied) sees a folder that
    is not a run yet; the listing's stamp does not move when the status appears, so the index
    must look at that folder again rather than wait for another run to change the listing."""
    root = tmp_path / "runs"
    make_run(root, "before")
    index = RunIndex(root)
    index.refresh()
    (root / "20991231-000000-late").mkdir()  # made, its status not written yet
    index.refresh()
    index.listing_stamp = root.stat().st_mtime_ns  # as a listing trusted after the racy window
    status = Status()
    status.move(SUCCEEDED, "done", 0)
    late = RunDirectory(root / "20991231-000000-late")
    late.write_spec({"name": "late", "command": ["true"]})
    late.write_status(status)
    assert [r["name"] for r in index.refresh().updated] == ["late"]
    assert sorted(r["name"] for r in index.records()) == ["before", "late"]


def test_a_listing_taken_in_the_same_tick_as_its_stamp_is_listed_again(tmp_path: Path) -> None:
    """Directory mtimes move in coarse ticks: a run made in the tick of the last listing leaves
    the stamp as it was, so a listing that recent is not trusted."""
    root = tmp_path / "runs"
    make_run(root, "first")
    index = RunIndex(root)
    stamp = root.stat().st_mtime_ns
    index.refresh()
    assert index.listing_stamp is None  # listed within the racy window of the folder's change
    second = make_run(root, "second")
    os.utime(root, ns=(stamp, stamp))  # made in the same tick: the folder's stamp did not move
    assert [r["id"] for r in index.refresh().updated] == [second.id]
