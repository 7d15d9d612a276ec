"""Starting the per-user scheduler process (`kubelab.schedules.scheduler`) unless one runs:
what creating or resuming a schedule, the CLI and the server's keeper all call."""

from __future__ import annotations

from pathlib import Path

from kubelab.daemon import start_module
from kubelab.driver_store import flock


def ensure_running(home: Path) -> bool:
    """Start the scheduler for `home` unless one runs; True when one was started."""
    root = Path(home) / "schedules"
    root.mkdir(parents=True, exist_ok=True)
    with flock(root / "scheduler.lock", blocking=False) as free:
        if not free:
            return False
    start_module("kubelab.schedules.scheduler", str(home), root / "scheduler.log")
    return True
