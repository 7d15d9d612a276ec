"""Notebook tests: real notebooks executed by nbclient against a real Jupyter server.

How the kernel reaches the server: nbclient starts the kernel with the environment a kernel
of that server gets (`KUBELAB_API_URL`, `KUBELAB_API_TOKEN`, `KUBELAB_HOME`,
`KUBELAB_SERVER_ROOT`). The token is the server's own login token (the API accepts it as it
accepts the kernel token the server hands its kernels), because the kernel token never
leaves the server's memory. Everything after that is the product's path: magics → REST
client → handlers → Experiments → local backend, and events back over SSE.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_server_process import JupyterServer
from notebook_support import (  # noqa: F401
    kernel_env,
    kill_if_alive,
    pid_alive,
    run_notebook,
    start_server,
    text_of,
    wait_gone,
)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_STOP_GRACE", "2")
    monkeypatch.delenv("KUBELAB_API_URL", raising=False)
    monkeypatch.delenv("KUBELAB_FAKE_GPUS", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    return root


@pytest.fixture
def server(workspace: Path) -> Iterator[JupyterServer]:
    srv = start_server(workspace)
    try:
        yield srv
    finally:
        srv.stop()
