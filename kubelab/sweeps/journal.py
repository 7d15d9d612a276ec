"""The study's journal file as its one writer sees it: group commit, and reads from memory.

Optuna's `JournalFileBackend` is made for many writers sharing one file: it fsyncs every log
line, takes a lock file (a symlink created and removed) around every append, and opens and
re-reads the file whenever `JournalStorage` syncs, which it does before every read and after
every write (about 16 times for one TPE ask). A sweep's study has exactly one writer, its
driver, which holds the sweep's `driver.lock` for its whole life (readers such as the
importance view never write). So this backend:

- writes a line and flushes it to the kernel at once (a killed driver still loses nothing),
  without the lock file, and makes everything written so far durable only when `sync()` is
  called. The driver calls it before every effect outside the study (submitting a run,
  writing the ledger), so after a power loss the study still holds every trial a run or
  the ledger knows about; at worst a suggestion that never reached a run is asked again;
- reads the file once, when it opens, and afterwards answers reads from the lines it holds
  (those it read and those it wrote since), as parsed copies, exactly what a re-read would
  give.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from optuna.storages.journal import JournalFileBackend


class GroupCommitBackend(JournalFileBackend):
    def __init__(self, file_path: str) -> None:
        super().__init__(file_path)
        self.unsynced = False
        self.logs: list[dict[str, Any]] = list(super().read_logs(0))

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:  # type: ignore[override]
        return self.logs[log_number_from:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        lines = [json.dumps(log, separators=(",", ":")) for log in logs]
        with open(self._file_path, "ab") as handle:
            handle.write(("\n".join(lines) + "\n").encode("utf-8"))
            handle.flush()
        self.logs.extend(json.loads(line) for line in lines)  # what reading the file back gives
        self.unsynced = True

    def sync(self) -> None:
        """Make every line appended so far durable (one fsync of the file)."""
        if not self.unsynced:
            return
        fd = os.open(self._file_path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.unsynced = False
