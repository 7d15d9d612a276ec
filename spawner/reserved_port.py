"""A local server's port that no other account can take over once the server is gone.

The hub's proxy keeps routing to a server's port for a while after the server died (until the
hub's next poll). On an ordinary port any account may bind it meanwhile and receive the
user's requests, hub token included. So a root hub binds each server's socket itself, on a
port below `ip_unprivileged_port_start` (only root may bind those), and hands the listening
socket to the server (`KUBELAB_LISTEN_FD`, adopted by `kubelab.server_extension.listen`).
When the server dies the port is closed and stays closed to every account but root's.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

from kubelab.errors import KubelabError
from kubelab.server_extension.listen import LISTEN_FD

__all__ = ["LISTEN_FD", "reserve"]
LOWEST = 600  # leaves the well-known services below it alone


def unprivileged_start(path: Path = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")) -> int:
    """The first port any account may bind (1024 unless the admin lowered it)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return 1024


def reserve(ip: str) -> socket.socket | None:
    """A listening socket on a free root-only port of `ip`, or None where no such port exists
    (the machine lets every account bind low ports)."""
    ports = list(range(LOWEST, min(unprivileged_start(), 1024)))
    if not ports:
        return None
    random.shuffle(ports)
    for port in ports:
        sock = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET)
        try:
            sock.bind((ip, port))
            sock.listen(128)
        except OSError:
            sock.close()
            continue
        return sock
    raise KubelabError(
        f"no port between {LOWEST} and {ports[-1] if ports else LOWEST} is free on {ip} for the notebook "
        "server (each running server holds one); ask the admin"
    )
