"""Folders a root hub makes for a user, without following any path the user controls.

A user owns their workspace and can swap anything inside it for a symlink at any moment; a
root process that works by path name (`mkdir -p`, `os.chown`) then acts on whatever the link
points to. Here each step opens the next folder relative to the one before with `O_NOFOLLOW`
and `O_DIRECTORY`, and sets owner and mode on the open descriptor (`fchown`, `fchmod`): a link
or a file anywhere along the way is refused, by name.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from kubelab.errors import KubelabError

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def _opened(name: str | Path, dir_fd: int | None = None) -> Iterator[int]:
    fd = os.open(name, OPEN_DIR, dir_fd=dir_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _child(parent_fd: int, name: str, shown: Path) -> tuple[int, bool]:
    """Open (creating it if needed) the folder `name` inside `parent_fd`, never through a link;
    and whether it was created here."""
    created = False
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        created = True
    try:
        return os.open(name, OPEN_DIR, dir_fd=parent_fd), created
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise KubelabError(
                f"{shown} is a symbolic link or not a folder; kubelab will not follow it "
                "(remove it and start again)"
            ) from None
        raise


def make_owned_dirs(
    base: Path, parts: Sequence[str], owned_from: int, uid: int, gid: int, mode: int = 0o700
) -> None:
    """Create `base/parts[0]/parts[1]/…`; the folders from index `owned_from` on belong to
    `uid:gid` with `mode`, those before it stay root's (`0711` when created here: users pass
    through to their own folder without listing the others).

    `base` is the hub's own root (the admin's choice); nothing below it is trusted.
    """
    base.mkdir(parents=True, exist_ok=True)
    with _opened(base) as fd:
        current = os.dup(fd)
    shown = base
    try:
        for index, name in enumerate(parts):
            if name in ("", ".", "..") or "/" in name:
                raise KubelabError(f"'{name}' is not a folder name")
            shown = shown / name
            child, created = _child(current, name, shown)
            os.close(current)
            current = child
            if index >= owned_from:
                os.fchown(current, uid, gid)
                os.fchmod(current, mode)
            elif os.fstat(current).st_uid != os.geteuid():
                raise KubelabError(f"{shown} should belong to the hub's user; kubelab will not use it")
            elif created:
                os.fchmod(current, 0o711)
    finally:
        os.close(current)
