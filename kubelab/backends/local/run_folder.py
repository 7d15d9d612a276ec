"""Is a running run's folder still there? A detached runner outlives whoever submitted its run,
so when the folder goes (a removed test folder or home, `rm -rf`), nobody can read, stop or
delete the run any more: the runner takes that as a stop, ends the run's processes and leaves,
instead of running them for hours unseen. It looks at most once a second, on the polls that
already look for a stop, so a long run pays one `stat` a second for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

EVERY = 1.0  # seconds between looks


class RunFolder:
    def __init__(self, path: Path, every: float = EVERY):
        self.path = path
        self.every = every
        self.looked = time.monotonic()
        self.lost = False

    def gone(self) -> bool:
        """True once the folder was seen missing (looked at no more often than `every`)."""
        now = time.monotonic()
        if not self.lost and now - self.looked >= self.every:
            self.looked = now
            self.lost = not self.path.is_dir()
        return self.lost

    def write(self, write: Callable[[], None]) -> None:
        """Call `write` (a status file's), unless the folder is gone: then nobody reads it."""
        if self.lost:
            return
        try:
            write()
        except FileNotFoundError:
            if self.path.is_dir():
                raise
            self.lost = True
