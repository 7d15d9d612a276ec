"""Is a recorded process still alive, and still the one that was recorded?

Runners, sweep and pipeline drivers and warm helpers record their pid (and its start time); whoever
checks on them later must neither trust a zombie nor mistake a reused pid for them. From /proc.
"""

from __future__ import annotations

import os


def pid_alive(pid: int | None) -> bool:
    """True while `pid` runs (a zombie does not: it only waits to be reaped)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def process_start_time(pid: int) -> float | None:
    """The kernel's start time of `pid` (clock ticks since boot), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return float(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None
