"""The local runner's process tree: its replicas' groups, their descendants, and the pids it
must tell apart.

Each replica runs in its own process group, and the runner is a child subreaper, so a stop
reaches everything a training script forks (data-loader workers, torchrun children) even
once their parent has exited. Linux's /proc and pidfds, with fallbacks where there are none.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

REAP_POLL = 0.05  # seconds between signalling a dying tree's stragglers again (the runner's POLL)


PR_SET_CHILD_SUBREAPER = 36


def stop_grace() -> float:
    """Seconds between SIGTERM and SIGKILL when stopping (`KUBELAB_STOP_GRACE`, default 10)."""
    return float(os.environ.get("KUBELAB_STOP_GRACE", "10"))


@dataclass
class Replica:
    """One of a run's processes (a worker, a parameter server, an elastic run's torchrun agent)."""

    role: str
    index: int
    process: subprocess.Popen[bytes]
    pidfd: int | None = None  # readable once the process exits: a wait with no polling delay

    @property
    def label(self) -> str:
        return f"replica {self.index}" if self.role == "worker" else f"{self.role} {self.index}"

    def record(self, state: str) -> dict[str, Any]:
        """Its entry in the status's `replicas`."""
        pid = self.process.pid
        return {"role": self.role, "index": self.index, "pid": pid, "state": state, "exit_code": None}


def become_subreaper() -> None:
    """Orphaned descendants (a daemon whose parent exited) become this process's children
    rather than init's, so they stay findable; Linux only, a no-op elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def descendants(root: int) -> list[int]:
    """Every process below `root` in the process tree, from /proc (parents before children)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found += below
        frontier += below
    return found


def has_children() -> bool:
    """Whether this process has a child, running or a zombie (nothing is reaped). A subreaper
    without children has no descendants at all: an orphan below it would have become its child."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):  # no waitid here: let /proc answer
        return True
    return True


def end_descendants(signum: int, keep: Collection[int] = frozenset(), rounds: int = 5) -> None:
    """Signal every descendant of this runner (but `keep`: the replicas, which Popen reaps);
    again while new ones appear (a process forking as it dies), then reap the orphans."""
    for _ in range(rounds):
        if not has_children():  # the common end of a run: no /proc walk (~3 ms, more on a busy host)
            return
        pids = [pid for pid in descendants(os.getpid()) if pid not in keep]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        if signum != signal.SIGKILL:
            return
        time.sleep(REAP_POLL)
        for pid in pids:  # orphans adopted by this subreaper are its children to reap
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def stop_replicas(
    replicas: list[Replica], grace: float, beside: Callable[[int], None] = lambda _signum: None
) -> list[Replica]:
    """SIGTERM each running replica's process group, SIGKILL what is left of them after `grace`
    seconds, and wait for them; `beside(signum)` signals, each time, what lives outside those
    groups (descendants that left them, an elastic run's workers). The replicas still running
    when the grace ended: they ignored SIGTERM, and the run's reason says so."""
    for replica in replicas:
        if replica.process.poll() is None:
            signal_group(replica.process.pid, signal.SIGTERM)
    beside(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(r.process.poll() is None for r in replicas):
        time.sleep(REAP_POLL)
    stubborn = [replica for replica in replicas if replica.process.poll() is None]
    for replica in replicas:
        signal_group(replica.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            replica.process.wait(timeout=5)
    beside(signal.SIGKILL)
    return stubborn


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def open_pidfd(pid: int) -> int | None:
    """A pidfd for `pid` (Linux 5.3+), or None where there is none: then the watch polls."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
