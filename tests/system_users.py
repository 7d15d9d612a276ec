"""Real system accounts for tests that need another user on this machine (they run as root).

`with system_user() as name:` creates a fresh account with `useradd` and removes it (and
its home) afterwards, so an attack is tried by a user the kernel really tells apart.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates system users: needs root")


@contextlib.contextmanager
def system_user(prefix: str = "klt", password: str | None = None) -> Iterator[pwd.struct_passwd]:
    name = f"{prefix}{secrets.token_hex(3)}"
    subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True
    )
    try:
        if password is not None:
            subprocess.run(
                ["chpasswd"], input=f"{name}:{password}\n", text=True, check=True, capture_output=True
            )
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "--force", "--remove", name], capture_output=True)


def as_user(entry: pwd.struct_passwd, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """Run `argv` as that user (real uid, gid and groups), as a hostile user would."""

    def drop() -> None:
        os.setgid(entry.pw_gid)
        os.initgroups(entry.pw_name, entry.pw_gid)
        os.setuid(entry.pw_uid)

    kwargs.setdefault("env", {"HOME": entry.pw_dir, "PATH": "/usr/bin:/bin"})
    return subprocess.run(argv, preexec_fn=drop, capture_output=True, text=True, **kwargs)
