"""The index is a cache: deleting it, or its run directories changing, loses nothing."""

from __future__ import annotations

from kubelab.index import RunIndex
from kubelab.records import SUCCEEDED, RunDirectory, Status, summary


def make_run(root, name, state=SUCCEEDED):
    status = Status()
    status.move(state, "done", 0)
    return RunDirectory.create(root, {"name": name, "command": ["true"]}, status)


def test_rebuilds_from_run_directories(tmp_path):
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


def test_unfinished_runs_are_reread_when_their_files_change(tmp_path):
    root = tmp_path / "runs"
    run = RunDirectory.create(root, {"name": "live", "command": ["true"]}, Status())
    index = RunIndex(root)
    index.refresh()
    with open(run.metrics_file, "a") as handle:
        handle.write('{"step": 1, "metrics": {"loss": 0.5}}\n')
    changed = index.refresh().updated
    assert [r["metrics"] for r in changed] == [{"loss": 0.5}]
    assert not index.refresh()


def test_a_corrupt_cache_is_ignored(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "x")
    (tmp_path / "index.marshal").write_bytes(b"garbage")
    index = RunIndex(root)
    index.refresh()
    assert [r["name"] for r in index.records()] == ["x"]


def test_metrics_are_folded_incrementally_and_torn_lines_wait(tmp_path):
    root = tmp_path / "runs"
    run = RunDirectory.create(root, {"name": "live", "command": ["true"]}, Status())
    index = RunIndex(root)
    with open(run.metrics_file, "a") as handle:
        handle.write('{"step": 1, "metrics": {"loss": 0.5, "acc": 0.1}}\n{"step": 2, "metr')
    index.refresh()
    assert (index.get(run.id)["metrics"], index.get(run.id)["step"]) == ({"loss": 0.5, "acc": 0.1}, 1)
    folded = index.entries[run.id][2]
    with open(run.metrics_file, "a") as handle:
        handle.write('ics": {"loss": 0.25}}\n')
    index.refresh()
    assert index.get(run.id)["metrics"] == {"loss": 0.25, "acc": 0.1} and index.get(run.id)["step"] == 2
    assert index.entries[run.id][2] == run.metrics_file.stat().st_size > folded
    assert index.get(run.id)["metrics"] == summary(run)["metrics"]  # same as a full read
