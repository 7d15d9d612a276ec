"""The server listens on the socket its hub bound for it (`kubelab.spawner.reserved_port`).

A root hub binds each local server's port itself, below 1024, so that no other account can take
it once the server is gone; the server inherits that listening socket as `KUBELAB_LISTEN_FD`.
Jupyter Server can only bind a port itself, so its two binding steps are replaced, on this one
server, by adopting the inherited socket.
"""

from __future__ import annotations

import os
import socket
from typing import Any

LISTEN_FD = "KUBELAB_LISTEN_FD"


def adopt_inherited_socket(serverapp: Any) -> int | None:
    """Serve on the inherited socket, if there is one (its port); kernels never inherit it."""
    raw = os.environ.pop(LISTEN_FD, "")
    if not raw.isdigit():
        return None
    for step in ("_find_http_port", "_bind_http_server_tcp"):
        if not callable(getattr(serverapp, step, None)):
            raise RuntimeError(f"this Jupyter Server has no {step}: kubelab cannot serve on {LISTEN_FD}")
    sock = socket.socket(fileno=int(raw))
    sock.set_inheritable(False)
    sock.setblocking(False)
    port: int = sock.getsockname()[1]
    serverapp.port = port

    def find_port() -> None:
        """The hub chose and bound the port already."""

    def bind() -> bool:
        serverapp.http_server.add_sockets([sock])
        return True

    serverapp._find_http_port = find_port
    serverapp._bind_http_server_tcp = bind
    return port
