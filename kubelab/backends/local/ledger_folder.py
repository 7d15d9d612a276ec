"""The GPU ledger's folder on a root hub: root's, shared with the lab's group, sticky.

Every server the hub starts joins one group and shares `gpus.json` (the ledger) and `gpus.lock`
(its `flock`) with the others. Members must write both, but none may take them from the
others: so root creates them, `root:<group> 0660` (made whole under a temporary name, then
renamed into place, so no one ever meets a half-made file), and the folder is `3770`: setgid
for the group, sticky so that a member cannot unlink or rename root's files (the ledger is then
rewritten in place, under its lock). Whatever a member planted under those names meanwhile (a
link, a folder, a file of their own or a mode that shuts the others out) is replaced at the
hub's next look, and the hub's log names its owner.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from pathlib import Path

from kubelab.backends.local.gpus import LEDGER, LOCK, OPEN_FLAGS, account_name, checked_dir

FOLDER_MODE = 0o3770
FILE_MODE = 0o660
MAX_LEDGER = 1 << 20


def share_with_group(path: Path, gid: int) -> list[str]:
    """Make the ledger folder `root:gid 3770` and its files root's, the group's, `0660`; the
    sentences name what was repaired and whose it was (for the admin's log)."""
    fd = os.open(checked_dir(path), os.O_RDONLY | os.O_DIRECTORY | OPEN_FLAGS)
    try:
        os.fchown(fd, 0, gid)
        os.fchmod(fd, FOLDER_MODE)
    finally:
        os.close(fd)
    return [said for name in (LOCK, LEDGER) if (said := _root_file(path, name, gid))]


def _root_file(folder: Path, name: str, gid: int) -> str | None:
    path = folder / name
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and _sound(info, gid):
        return None
    kept = _contents(path) if info is not None and name == LEDGER else b""
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        os.fchown(fd, 0, gid)
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(kept)
        if info is not None and stat.S_ISDIR(info.st_mode):  # a file cannot replace a folder
            os.rename(path, folder / f".planted-{name}-{int(time.time())}")
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if info is None:
        return None
    return (
        f"{path} was {_kind(info)} of {account_name(info.st_uid)} (group {info.st_gid}, mode "
        f"{stat.S_IMODE(info.st_mode):o}), which could shut the lab's other users out of the GPUs; "
        "replaced by root's"
    )


def _sound(info: os.stat_result, gid: int) -> bool:
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_nlink == 1
        and (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, gid, FILE_MODE)
    )


def _kind(info: os.stat_result) -> str:
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(info.st_mode):
        return "a folder"
    if not stat.S_ISREG(info.st_mode):
        return "a special file"
    return "a file with other links" if info.st_nlink != 1 else "a file"


def _contents(path: Path) -> bytes:
    """The ledger's entries, if it is a plain file (never through a link, never a FIFO's wait)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | OPEN_FLAGS)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return b""
        return handle.read(MAX_LEDGER)
