"""What a notebook server opens on: JupyterLab, or VS Code (code-server through
jupyter-vscode-proxy, at `/vscode/`) on the user's workspace.

One definition for the spawn form, the option's validation and both spawners. code-server runs
behind the Jupyter server's own authentication on a Unix socket of mode 0600 (never a loopback
port without a password, which any account on the machine could open), and every request
jupyter-server-proxy forwards counts as the server's activity, so a VS Code session (and its
terminals) keeps an idle culler away like a notebook does.
"""

from __future__ import annotations

import os
from pathlib import Path

INTERFACES = {"lab": "JupyterLab", "vscode": "VS Code"}
DEFAULT = "lab"
URLS = {"lab": "/lab", "vscode": "/vscode/"}


def check(value: object) -> str | None:
    """The reason `value` is not an interface, or None."""
    if value in INTERFACES:
        return None
    return f"must be one of {', '.join(INTERFACES)}, not {value!r}"


def vscode_env(interface: str, workspace: str) -> dict[str, str]:
    """jupyter-vscode-proxy's variables: the folder VS Code opens and its private socket."""
    if interface != "vscode":
        return {}
    return {"CODE_WORKINGDIR": workspace, "JUPYTER_VSCODE_PROXY_USE_SOCKET": "1"}


def path_with(tools: list[str], path: str) -> str:
    """`path` with `tools` (the folders of `kubelab` and code-server) first, for the server and the
    terminals it starts, JupyterLab's and VS Code's."""
    folders = [p for folder in [*tools, path] for p in folder.split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(folders))


def kubelab_bin() -> str:
    """The folder of the `kubelab` command beside this Python (the hub's environment)."""
    import sys

    return str(Path(sys.executable).parent)
