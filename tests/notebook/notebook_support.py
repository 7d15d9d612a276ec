"""Helpers shared by the notebook tests (importable by name, unlike conftest)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import cast

import nbformat
from jupyter_server_process import JupyterServer
from nbclient import NotebookClient


def start_server(workspace: Path, **env: str) -> JupyterServer:
    return JupyterServer(workspace, workspace.parent / "home", env=env).start()


def kernel_env(server: JupyterServer) -> dict[str, str]:
    return {
        **os.environ,
        "KUBELAB_API_URL": server.api.rstrip("/"),
        "KUBELAB_API_TOKEN": server.token,
        "KUBELAB_HOME": str(server.home),
        "KUBELAB_SERVER_ROOT": str(server.root),
        "JPY_SESSION_NAME": str(server.root / "experiment.ipynb"),
    }


def run_notebook(
    server: JupyterServer, cells: list[str], allow_errors: bool = False, timeout: int = 180
) -> nbformat.NotebookNode:
    """Execute `cells` in a fresh kernel in the server's workspace; the executed notebook."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(server.root)}},
    )
    client.execute(env=kernel_env(server))  # passed on to the kernel manager's start_kernel
    return cast(nbformat.NotebookNode, nb)


def text_of(cell: nbformat.NotebookNode) -> str:
    """Everything a cell showed, as text (streams, text/plain, HTML and errors)."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("display_data", "execute_result"):
            parts.extend(str(v) for k, v in out.data.items() if k.startswith("text/"))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return "\n".join(parts)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return False


def kill_if_alive(pid: int) -> None:
    if pid_alive(pid):
        os.killpg(pid, signal.SIGKILL)
