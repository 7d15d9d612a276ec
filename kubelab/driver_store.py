"""The folder of a job run by a detached, restartable driver: a sweep's or a pipeline's.

One definition of what both share, so their drivers, services and the server agree:

- `<spec>.json`: the validated spec, never changed after creation.
- `state.json`: status and the ledger (trials, steps), written atomically (`write_json`) and
  only by whoever holds the folder: its driver while one lives, else a controller holding
  `state.lock`.
- `driver.lock`: flock'ed by the live driver for its whole life. The kernel drops the lock
  when the process dies, even by SIGKILL, so "is a driver alive?" never trusts a stale pid.
- `stop-requested`: a controller's request to the live driver; `driver.log`: its output.

Folder names are ids that sort by creation time; a folder being created is `.<id>.new`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

# A folder's status is a run's state: the one vocabulary (kubelab.records), re-exported.
from kubelab.records import FAILED as FAILED
from kubelab.records import RUNNING as RUNNING
from kubelab.records import STOPPED as STOPPED
from kubelab.records import SUCCEEDED as SUCCEEDED
from kubelab.records import utcnow


class DriverDirectory:
    """One driver's folder; subclasses name their spec file and read their own state."""

    spec_name = "spec.json"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.name

    @property
    def home(self) -> Path:
        return self.path.parent.parent

    @property
    def spec_file(self) -> Path:
        return self.path / self.spec_name

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def stop_file(self) -> Path:
        return self.path / "stop-requested"

    @property
    def log_file(self) -> Path:
        return self.path / "driver.log"

    def exists(self) -> bool:
        return self.state_file.exists()

    def spec_data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.spec_file.read_text())  # written at creation
        return data

    def state_data(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state_file.read_text())
        return data

    def state_mtime(self) -> int | None:
        try:
            return self.state_file.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    # -- locks ----------------------------------------------------------------------
    @contextlib.contextmanager
    def driver_lock(self) -> Iterator[bool]:
        """Held by the live driver; yields False when another process holds it."""
        with flock(self.path / "driver.lock", blocking=False) as got:
            yield got

    @contextlib.contextmanager
    def state_lock(self) -> Iterator[None]:
        """Held briefly by anyone who decides, from state.json, whether to write it."""
        with flock(self.path / "state.lock", blocking=True):
            yield

    def driver_alive(self) -> bool:
        with self.driver_lock() as free:
            return not free

    def needs_driver(self) -> bool:
        """Running with no live driver (it died, or the machine rebooted): start one."""
        with self.state_lock():
            return self.state_data()["status"] == RUNNING and not self.driver_alive()

    # -- requests to a live driver ----------------------------------------------------
    def request_stop(self) -> None:
        self.stop_file.write_text(utcnow())

    def stop_requested(self) -> bool:
        return self.stop_file.exists()

    def clear_stop(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.stop_file.unlink()


D = TypeVar("D", bound=DriverDirectory)


class DriverStore(Generic[D]):
    """All folders of one kind under `$KUBELAB_HOME/<folder>/`, newest first."""

    def __init__(self, home: Path, folder: str, make: Callable[[Path], D]):
        self.root = Path(home) / folder
        self.make = make

    def item(self, item_id: str) -> D:
        return self.make(self.root / item_id)

    def all(self) -> list[D]:
        try:
            names = sorted(os.listdir(self.root), reverse=True)  # ids sort by creation time
        except FileNotFoundError:
            return []
        return [d for d in (self.item(n) for n in names if not n.startswith(".")) if d.exists()]


L = TypeVar("L", bound="DriverLedger")


@dataclass
class DriverLedger:
    """What every driver's `state.json` holds besides its entries (trials, steps): its status
    and whose folder it is. Subclasses add their own fields and name their entries."""

    ENTRIES: ClassVar[str]  # the field holding the ledger: name -> entry dataclass
    ENTRY: ClassVar[type]

    status: str = RUNNING
    reason: str = "starting"
    created_at: str = field(default_factory=utcnow)
    finished_at: str | None = None
    user: str | None = None
    base_dir: str = ""
    confine: bool = False

    def to_dict(self) -> dict[str, Any]:
        """As JSON data, entries as plain dicts. Shallow copies, not `asdict`'s deep walk: a
        driver writes this at every turn."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data[self.ENTRIES] = {k: dict(vars(v)) for k, v in getattr(self, self.ENTRIES).items()}
        return data

    @classmethod
    def from_dict(cls: type[L], data: dict[str, Any]) -> L:
        """From JSON data: unknown keys (a newer kubelab's) dropped, entries built as `ENTRY`."""
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        known[cls.ENTRIES] = {k: cls.ENTRY(**v) for k, v in (data.get(cls.ENTRIES) or {}).items()}
        return cls(**known)


def write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    """Atomically: readers see the old file or the new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=str))
    os.replace(tmp, path)


@contextlib.contextmanager
def flock(path: Path, blocking: bool) -> Iterator[bool]:
    """An exclusive flock on `path` (created 0644); yields False when not blocking and taken."""
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
