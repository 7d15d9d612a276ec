"""A local notebook server's own log, and the line of it that says why the server died.

A server that exits before it listens (a bad config, a module it cannot import, a port taken)
wrote the reason on its stderr; JupyterHub can only say "failed to start [status=1]". Each
server's stderr therefore goes to `<workspace>/.kubelab/server.log` (`server-<name>.log` for a
named server), and the spawn's refusal quotes the line that names the cause.

The server's own process opens the log after it became the user (`redirect_stderr`, in the
preexec), so the file is the user's and a root hub writes nothing in the user's folder. The
hub reads it back (`read_tail`) without following any link below its root and only when the
file belongs to the server's account: a log swapped for a link to, or a hard link of, a file
the user may not read shows nothing of it.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from kubespawner.slugs import safe_slug

from .user_dirs import OPEN_DIR

TAIL_BYTES = 64 * 1024  # the cause is in the last lines; a long-lived server's log is not read whole
MAX_CAUSE = 300
REDACTED = "[redacted]"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_JUPYTER_LOG = re.compile(r"^\[([DIWEC]) \d{4}-\d\d-\d\d [\d:.]+ [^\]]*\]\s*")  # `[C 2026-… ServerApp] …`
_NAMED_SECRET = re.compile(  # `JUPYTERHUB_API_TOKEN=…`, `?token=…`, `"password": "…"`
    r"(?i)(\b[\w-]*(?:token|secret|password|passwd)\b[\"']?\s*[=:]\s*[\"']?)[^\s\"'&,;]+"
)
_AUTH_HEADER = re.compile(r"(?i)(\b(?:token|bearer|basic)\s+)[A-Za-z0-9._~+/=-]{12,}")
_LONG_HEX = re.compile(r"\b[0-9a-fA-F]{32,}\b")  # JupyterHub's tokens, and any key that looks like one


def log_name(server_name: str) -> str:
    """The log's file name in `.kubelab`: one per server, so named servers keep their own."""
    return f"server-{safe_slug(server_name, max_length=48)}.log" if server_name else "server.log"


def redirect_stderr(path: Path, then: Callable[[], None] | None) -> Callable[[], None]:
    """A preexec that runs `then` (JupyterHub's: become the user) and sends stderr to `path`,
    truncated: the log is this start's. Opened as whoever the server runs as; if it cannot be
    opened (a link, a missing folder), the server keeps the hub's stderr and starts anyway."""

    def preexec() -> None:
        if then is not None:
            then()
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            os.dup2(fd, 2)
            os.close(fd)

    return preexec


def read_tail(base: Path, parts: Sequence[str], owner: int, since: float, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of `base/parts…` as text, or "" unless it is a regular file of
    `owner` written at or after `since` (an older one is an earlier start's). Each step below
    `base` (the hub's own root) is opened relative to the one before, never through a link."""
    try:
        current = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the admin's choice
    except OSError:
        return ""
    try:
        for name in parts[:-1]:
            child = os.open(name, OPEN_DIR, dir_fd=current)
            os.close(current)
            current = child
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=current)
    except OSError:
        return ""
    finally:
        os.close(current)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != owner or info.st_mtime < since:
            return ""
        start = max(0, info.st_size - limit)
        data = os.pread(fd, info.st_size - start, start)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without the given secrets nor anything shaped like a token or password."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _NAMED_SECRET.sub(lambda m: m.group(1) + REDACTED, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    return _LONG_HEX.sub(REDACTED, text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _clean(line: str) -> str:
    return _CONTROL.sub("", _ANSI.sub("", line)).strip()


def crash_cause(log: str, secrets: Iterable[str] = ()) -> str:
    """The line of a dead server's log that names why it died, redacted and at most MAX_CAUSE
    characters; "" for an empty log.

    The latest of: the exception line closing the last Python traceback (`ModuleNotFoundError:
    No module named 'x'`, also one Jupyter's log indents) and the last critical or error line
    of Jupyter's log (its prefix dropped); failing both, the last line written (`raise
    SystemExit("...")`, a `kubelab:` refusal).
    """
    lines = [_clean(line) for line in log.splitlines()]
    written = [index for index, line in enumerate(lines) if line]
    if not written:
        return ""
    chosen = written[-1]
    candidates = []
    tracebacks = [i for i in written if lines[i].startswith("Traceback (most recent call last)")]
    if tracebacks:  # its frames are indented deeper than it; its exception line is not
        raw = [_ANSI.sub("", line) for line in log.splitlines()]
        depth = _indent(raw[tracebacks[-1]])
        after = [i for i in written if i > tracebacks[-1] and _indent(raw[i]) <= depth]
        candidates += after[:1]
    levels = [i for i in written if (found := _JUPYTER_LOG.match(lines[i])) and found.group(1) in "CE"]
    candidates += levels[-1:]
    if candidates:
        chosen = max(candidates)
    cause = redact(_JUPYTER_LOG.sub("", lines[chosen]), secrets)
    return cause if len(cause) <= MAX_CAUSE else cause[: MAX_CAUSE - 1] + "…"
