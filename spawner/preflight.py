"""What `kubelab hub` checks before it starts, so a spawn does not fail later with a bare 500.

As root the hub runs each notebook as its user: that user must be able to run the Python
kubelab is installed in (a virtualenv under root's home is not). Without root it can start a
server only for its own account, and says so.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from kubelab.errors import FieldError, ValidationError

from .launch_checks import unreachable_by


def closed_to_others(path: Path) -> Path | None:
    """The first folder on the way to `path` (or `path` itself) another account cannot use:
    `unreachable_by` for an account that owns nothing here and is in no group."""
    closed = unreachable_by(path, -1, set())
    return None if closed is None else closed[0]


def interpreter_paths() -> list[Path]:
    """The interpreter and the folders it imports kubelab and JupyterHub's single-user server from."""
    import jupyterhub

    import kubelab

    return [Path(sys.executable), Path(kubelab.__file__).parent, Path(jupyterhub.__file__).parent]


def check_runnable_by_users(paths: list[Path] | None = None) -> None:
    """Refuse to start a root hub whose notebooks could not start as their users."""
    problems = []
    for path in paths or interpreter_paths():
        closed = closed_to_others(path)
        if closed is not None:
            problems.append(
                FieldError(
                    str(path),
                    (
                        f"other users cannot reach it: {closed} is mode "
                        f"{stat.S_IMODE(closed.stat().st_mode):o}. "
                        f"Install kubelab where every user can run it (e.g. `python3 -m venv /opt/kubelab && "
                        f"/opt/kubelab/bin/pip install kubelab`), or `chmod o+rx {closed}`"
                    ),
                )
            )
    if problems:
        raise ValidationError("the hub runs notebooks as their users, who cannot run this Python", problems)


def single_user_notice(user: str) -> str:
    return (
        f"kubelab hub runs as {user}, not root: it starts a server only for {user} "
        "(each notebook runs as its user only when the hub runs as root)"
    )
