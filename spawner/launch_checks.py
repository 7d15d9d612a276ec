"""What the local spawner checks just before it launches a server, so a spawn that cannot work
fails with a sentence naming the cause on the form (and in the REST API's answer) instead of a
bare 500 or a "failed to start" the user can do nothing with.

`kubelab hub` checks at start that *other* accounts may run its Python (`preflight`); a hub
started some other way, or a Python changed since, is caught here for the one user at hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
from pathlib import Path
from typing import Any

from kubelab.errors import KubelabError

INSTALL_HINT = (
    "install kubelab where every user can run it (e.g. `python3 -m venv /opt/kubelab && "
    "/opt/kubelab/bin/pip install kubelab`)"
)


def _allowed(info: os.stat_result, uid: int, gids: set[int], need: int) -> bool:
    """Whether `uid` (with groups `gids`) has the `need` bits (r=4, x=1) on a file, as the kernel
    decides: the owner's bits for the owner, else the group's for a member, else the others'."""
    mode = stat.S_IMODE(info.st_mode)
    if uid == 0:  # root passes every folder and runs any file with an x bit
        return not stat.S_ISREG(info.st_mode) or not need & 1 or bool(mode & 0o111)
    if info.st_uid == uid:
        bits = mode >> 6
    elif info.st_gid in gids:
        bits = mode >> 3
    else:
        bits = mode
    return bits & need == need


def unreachable_by(path: Path, uid: int, gids: set[int]) -> tuple[Path, int] | None:
    """The first folder on the way to `path` (or the file itself) that `uid` cannot pass (or read
    and run), with its mode; None when the account can run `path`."""
    path = path.resolve()  # a virtualenv's python is a link: what counts is where it points
    for folder in [*reversed(path.parents), path]:
        info = folder.stat()
        need = 0o1 if folder != path else 0o5
        if not _allowed(info, uid, gids, need):
            return folder, stat.S_IMODE(info.st_mode)
    return None


def check_runnable_by(entry: Any, paths: list[Path]) -> None:
    """Refuse, naming the folder and the fix, when the user's account cannot run `paths`."""
    gids = set(os.getgrouplist(entry.pw_name, entry.pw_gid))
    for path in paths:
        try:
            closed = unreachable_by(path, entry.pw_uid, gids)
        except OSError as exc:
            raise KubelabError(
                f"the notebook server cannot start: {path} is missing ({exc.strerror})"
            ) from None
        if closed is not None:
            folder, mode = closed
            raise KubelabError(
                f"the notebook server runs as {entry.pw_name}, who cannot run {path}: {folder} is mode "
                f"{mode:o}. Ask the admin to {INSTALL_HINT}, or to `chmod o+rx {folder}`"
            )


def check_port_free(ip: str, port: int) -> None:
    """A configured port already taken would make the server exit at once with no word to the user."""
    if not port:
        return  # JupyterHub picks a free one
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a port
        try:  # left in TIME_WAIT by the user's last server is free, one listened on is not
            probe.bind((ip or "127.0.0.1", port))
        except OSError as exc:
            raise KubelabError(
                f"the notebook server cannot listen on {ip or '127.0.0.1'}:{port}: {exc.strerror} "
                "(another process holds that port; ask the admin to free it or to leave "
                "LocalKubeLabSpawner.port unset)"
            ) from None


def launch_failure(user: str, exc: OSError) -> KubelabError:
    """The sentence for a server process that could not be launched at all."""
    where = f" ({exc.filename})" if exc.filename else ""
    return KubelabError(f"the notebook server for {user} could not be launched: {exc.strerror or exc}{where}")


def folder_failure(path: Path, exc: OSError) -> KubelabError:
    """The sentence for a workspace or archive the hub could not create."""
    return KubelabError(
        f"the hub could not create {path}: {exc.strerror or exc} (ask the admin to check "
        "LocalKubeLabSpawner.root, KUBELAB_HUB_ROOT, and that it is a writable folder)"
    )


def exit_reason(user: str, status: int, cause: str = "", log: Path | None = None) -> KubelabError:
    """The sentence for a server that exited before it listened: how it ended, and the line of
    its log that says why (`server_log.crash_cause`), with where the rest of its output is."""
    from .gpu_exec import GPUS_TAKEN

    if status == GPUS_TAKEN:
        ended = "the GPUs it was given were taken by another run before it started; try again"
    elif status < 0:
        ended = f"it was killed by signal {-status}"
    else:
        ended = f"it exited with status {status}"
    said = f": {cause}" if cause and status != GPUS_TAKEN else ""
    where = f" (its output is in {log})" if log is not None else ""
    return KubelabError(f"the notebook server for {user} stopped before it answered: {ended}{said}{where}")


async def until_listening(process: Any, address: tuple[str, int], timeout: float) -> int | None:
    """None once the server answers HTTP; its exit status if its process ends first
    (JupyterHub would otherwise wait out its timeout and answer with a bare "failed to start").
    A connection alone proves nothing when the hub bound the server's socket for it
    (`reserved_port`): the kernel accepts into that socket's backlog before the server runs."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        status: int | None = process.poll()
        if status is not None:
            return status
        try:
            reader, writer = await asyncio.open_connection(*address)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        try:
            writer.write(b"HEAD / HTTP/1.0\r\n\r\n")
            await writer.drain()
            answered = await asyncio.wait_for(reader.read(1), 0.5)
        except (OSError, asyncio.TimeoutError):
            answered = b""
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        if answered:
            return None
        await asyncio.sleep(0.1)
    return None
