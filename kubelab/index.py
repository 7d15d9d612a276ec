"""A rebuildable cache of run summaries, so listing 10,000 runs does not read 10,000 files.

The truth stays in the run directories. The cache keeps each run's summary with the
file stamps it was built from; a refresh re-reads only runs whose files changed (in
practice: the unfinished ones) and notices new and deleted directories. It is saved
with `marshal` (the fastest loader for plain data) and may be deleted at any time.
"""

from __future__ import annotations

import contextlib
import json
import marshal
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab.records import TERMINAL, RunDirectory, summary

CACHE_VERSION = 3  # entries: (file stamps, summary, metrics bytes folded)
# A directory's mtime moves in the kernel's coarse ticks (and whole seconds on some file
# systems): a listing taken this close to the stamp may have missed an entry made in the
# same tick, so it is not trusted and the next refresh lists again (git's "racy" rule).
RACY_NS = 2_000_000_000
# Ids of runs whose record changed after they finished (tags, a note), one a line: a finished
# run is otherwise never looked at again, and another process's index must hear of the edit.
TOUCHED = "touched.log"


@dataclass
class Changes:
    updated: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.updated or self.deleted)


class RunIndex:
    def __init__(self, runs_root: Path, cache_file: Path | None = None):
        self.runs_root = Path(runs_root)
        self.cache_file = cache_file or self.runs_root.parent / "index.marshal"
        self.entries: dict[str, tuple[tuple[Any, ...], dict[str, Any], int]] = {}
        self.listing_stamp: int | None = None
        # Listed directories that were not runs yet (made, but no status written): looked at
        # again on every refresh, since the listing's stamp will not move when they become runs.
        self.pending: set[str] = set()
        self.touched_file = self.runs_root.parent / TOUCHED
        self.touched_offset = 0  # bytes of TOUCHED already acted on (saved with the cache)
        self.loaded = False
        self.dirty = False
        # A server refreshes from its event hub's thread and from request threads at once.
        self.lock = threading.RLock()

    def load(self) -> None:
        self.loaded = True
        try:
            data = marshal.loads(self.cache_file.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):
            return
        entries = data.get("entries") if isinstance(data, dict) else None
        if isinstance(entries, dict) and data.get("version") == CACHE_VERSION:
            # A cache is only a cache: an entry of the wrong shape is dropped and re-read from its run.
            self.entries = {name: entry for name, entry in entries.items() if _well_formed(name, entry)}
            offset = data.get("touched")
            self.touched_offset = offset if isinstance(offset, int) else 0

    def save(self) -> None:
        with self.lock:
            self._save()

    def _save(self) -> None:
        if not self.dirty:
            return
        tmp = self.cache_file.with_name(f".{self.cache_file.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):  # a read-only home just means no cache
            tmp.write_bytes(
                marshal.dumps(
                    {"version": CACHE_VERSION, "entries": self.entries, "touched": self.touched_offset}
                )
            )
            os.replace(tmp, self.cache_file)
            self.dirty = False

    def refresh(self, full: bool = False) -> Changes:
        """Bring the cache up to date with the run directories; report what changed."""
        with self.lock:
            return self._refresh(full)

    def _refresh(self, full: bool) -> Changes:
        if not self.loaded:
            self.load()
        changes = Changes()
        try:
            stamp = self.runs_root.stat().st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if full or stamp != self.listing_stamp or self.listing_stamp is None:
            names = set(os.listdir(self.runs_root)) if stamp is not None else set()
            racy = stamp is not None and time.time_ns() - stamp < RACY_NS
            self.listing_stamp = None if racy else stamp
            for gone in set(self.entries) - names:
                del self.entries[gone]
                changes.deleted.append(gone)
            self.pending &= names
            candidates = [n for n in names if n not in self.entries or not self._finished(n)]
        else:
            candidates = [n for n in self.entries if not self._finished(n)]
            candidates += [n for n in self.pending if n not in self.entries]
        candidates += [n for n in self._touched() if n in self.entries and n not in candidates]
        for name in candidates:
            record = self._reread(name)
            if record is not None:
                changes.updated.append(record)
                self.pending.discard(name)
            elif name not in self.entries:
                if (self.runs_root / name).is_dir():
                    self.pending.add(name)
                else:
                    self.pending.discard(name)
            elif not (self.runs_root / name).exists():
                del self.entries[name]
                changes.deleted.append(name)
        if changes:
            self.dirty = True
        return changes

    def touch(self, name: str) -> None:
        """Say that a run's record changed though its status did not (every index re-reads it)."""
        with open(self.touched_file, "a") as handle:
            handle.write(name + "\n")

    def _touched(self) -> list[str]:
        """Runs named in TOUCHED since this index last looked (one stat when there are none)."""
        try:
            size = self.touched_file.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.touched_offset:  # the log was deleted and begun again
            self.touched_offset = 0
        if size == self.touched_offset:
            return []
        with open(self.touched_file, "rb") as handle:
            handle.seek(self.touched_offset)
            data = handle.read(size - self.touched_offset)
        complete = data[: data.rfind(b"\n") + 1]
        self.touched_offset += len(complete)
        self.dirty = True
        return list(dict.fromkeys(complete.decode(errors="replace").split()))

    def _finished(self, name: str) -> bool:
        return self.entries[name][1]["status"] in TERMINAL

    def _reread(self, name: str) -> dict[str, Any] | None:
        """The run's summary if its files changed since it was cached, else None."""
        run = RunDirectory(self.runs_root / name)
        try:
            stamp = (
                _stamp(run.status_file),
                _stamp(run.metrics_file),
                _stamp(run.tracking_file),
                _stamp(run.system_file),  # the record's system.* sums (folded incrementally)
                _stamp(run.notes_file),  # tags and a note edited later
            )
            if stamp[0] is None:
                return None  # a directory being created, or not a run
            cached = self.entries.get(name)
            if cached and cached[0] == stamp:
                return None
            # Fold only the metrics appended since last time: a long run is not re-parsed
            # from its first step at every report.
            offset, latest, step = 0, None, None
            if cached and stamp[1] is not None and cached[2] <= stamp[1][1]:
                offset, latest, step = cached[2], cached[1]["metrics"], cached[1]["step"]
            latest, step, offset = run.fold_metrics(offset, latest, step)
            record = summary(run, metrics=(latest, step))
        except (OSError, ValueError, json.JSONDecodeError, TypeError):
            return None
        self.entries[name] = (stamp, record, offset)
        return record

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return [entry[1] for entry in self.entries.values()]

    def get(self, name: str) -> dict[str, Any] | None:
        entry = self.entries.get(name)
        return entry[1] if entry else None


def _well_formed(name: object, entry: object) -> bool:
    if not (isinstance(name, str) and isinstance(entry, tuple) and len(entry) == 3):
        return False
    stamp, record, offset = entry
    return (
        isinstance(stamp, tuple)
        and isinstance(record, dict)
        and isinstance(offset, int)
        and record.get("id") == name
        and isinstance(record.get("status"), str)
    )


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return (info.st_mtime_ns, info.st_size)
