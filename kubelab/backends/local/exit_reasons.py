"""Why a replica ended, in words: its exit code or signal, and the line of its log that says why.

A failed run's reason names the cause, not only a code: the exception line of a Python
traceback (`ValueError: bad shape`), or Python's own complaint when the script could not even
start (`python: can't open file '/x/train.py': [Errno 2] No such file or directory`).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

TRACEBACK = "Traceback (most recent call last):"
TAIL_BYTES = 16384


def last_exception(log: Path, width: int = 300) -> str:
    """The exception line of the last Python traceback in a replica's log (`ValueError: bad
    shape`), so a failed run says why, not only its exit code; "" when there is none."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return ""
    if TRACEBACK not in tail:
        return _cannot_start(tail, width)
    after = tail[tail.rindex(TRACEBACK) + len(TRACEBACK) :].splitlines()
    # The exception is the first unindented line after the frames (chained ones come later
    # as a new traceback, which rindex already chose).
    for line in after:
        if line.strip() and not line.startswith((" ", "\t")):
            return line.strip()[:width]
    return ""


def describe_exit(code: int) -> str:
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        hint = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {code}"


def format_seconds(seconds: float) -> str:
    return f"{seconds:g}s" if seconds < 120 else f"{seconds / 60:g}m"


def _cannot_start(tail: str, width: int) -> str:
    """Python's one-line reason for not running a script at all (no traceback is printed)."""
    for line in reversed(tail.splitlines()):
        if "can't open file" in line or line.startswith(("ModuleNotFoundError:", "SyntaxError:")):
            return line.strip()[:width]
    return ""
