"""kubelab's detached processes a test left behind: runners, warm helpers, drivers and the
runs' own processes, found by the test's folder in their command line or environment.

A test's lab starts processes in their own sessions (they outlive the server by design), so
no process-group kill reaches them; matching the test's own folder, never a process name,
leaves alone whatever other users of the machine run at the same time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil


def names(process: psutil.Process, folder: str) -> bool:
    """Does `process` name `folder` (or a path under it) in its command line or environment?"""
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        texts = [*process.cmdline(), *process.environ().values()]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    for text in texts:
        for word in text.replace("=", " ").replace(":", " ").split():
            if word == folder or word.startswith(folder + os.sep):
                return True
    return False


def left_behind(folder: Path) -> list[psutil.Process]:
    """The live processes other than this one (and its parents) that name `folder`."""
    mine = {os.getpid(), *(parent.pid for parent in psutil.Process().parents())}
    path = str(folder.resolve())
    return [p for p in psutil.process_iter() if p.pid not in mine and names(p, path)]


def assert_none_left(folder: Path, timeout: float = 30.0) -> None:
    """Poll until no process names `folder`; else kill them (so one failure does not leak into
    the next test) and fail, listing them."""
    deadline = time.monotonic() + timeout
    while (left := left_behind(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not left:
        return
    described = []
    for process in left:
        try:
            described.append(f"{process.pid}: {' '.join(process.cmdline())}")
            process.kill()
        except psutil.Error:
            continue
    raise AssertionError(f"processes of {folder} left running:\n" + "\n".join(described))
