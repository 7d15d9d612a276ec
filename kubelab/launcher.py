"""`kubelab lab`: JupyterLab with kubelab on this machine, the newcomer's first step."""

from __future__ import annotations

import os
import secrets
import sys


def launch_lab(
    port: int = 8888, open_browser: bool = True, ip: str = "127.0.0.1", extra: list[str] | None = None
) -> int:
    from jupyterlab.labapp import LabApp

    token = os.environ.get("KUBELAB_LAB_TOKEN") or secrets.token_hex(24)
    argv = [
        f"--ServerApp.port={port}",
        f"--ServerApp.ip={ip}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.jpserver_extensions=kubelab.server_extension=True",
    ]
    if not open_browser:
        argv.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        print("kubelab: running as root; JupyterLab allows it only with --allow-root", file=sys.stderr)
        argv.append("--allow-root")
    argv += [a for a in (extra or []) if a != "--"]
    os.environ["KUBELAB_ANNOUNCE_URL"] = "1"  # the extension prints the URL once it listens
    LabApp.launch_instance(argv=argv)
    return 0
