"""Shared pytest setup: make `tests/` importable and register the control plane's fixtures."""

import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Warm helpers (kubelab.warm) that tests start exit soon after the test that made them. Servers
# keep no warm sweep driver here: each of the suite's many servers would import Optuna in one
# beside the test (tests/core/test_warm_pool.py turns it on where it is the subject).
os.environ.setdefault("KUBELAB_WARM_RUNNER_IDLE", "5")
os.environ.setdefault("KUBELAB_WARM_DRIVER_IDLE", "5")
os.environ.setdefault("KUBELAB_WARM_DRIVERS", "0")

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from controlplane.fixtures import (  # noqa: E402, F401
    cluster,
    kubeconfig,
    make_node,
    metrics_cluster,
    simulated_cluster,
)

SCHEDULER = "kubelab.schedules.scheduler"


def _started_at(pid: int) -> float:
    """A process's start as a wall-clock time (from /proc: boot time + start ticks)."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    booted = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return booted + ticks / os.sysconf("SC_CLK_TCK")


def _schedulers_started_since(since: float) -> list[int]:
    """Local schedulers (they detach, and outlive the server that started them by design) that
    this test session started for a home in the temporary folder."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if SCHEDULER.encode() not in argv:
                continue
            home = argv[argv.index(SCHEDULER.encode()) + 1].decode()
            if home.startswith(tempfile.gettempdir()) and _started_at(int(proc.name)) >= since:
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def _no_scheduler_left() -> Iterator[None]:
    """A schedule's home in pytest's kept temporary folders would keep its scheduler alive."""
    since = time.time() - 1
    yield
    for pid in _schedulers_started_since(since):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
