"""Starting kubelab's own long-lived helpers (runners, sweep drivers) detached.

Each gets its own session, so it outlives the server, the CLI and their terminals, and
a reaper thread, so a long-lived server that started it leaves no zombie behind.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path


def start_module(module: str, argument: str, log: Path) -> subprocess.Popen[bytes]:
    """`python -m module argument` in a new session, its output appended to `log`."""
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", module, argument],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    threading.Thread(target=process.wait, daemon=True).start()
    return process
