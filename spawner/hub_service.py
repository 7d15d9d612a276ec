"""Run a hub service's module so that JupyterHub's stop reaches it at once.

    python -m kubelab.spawner.hub_service jupyterhub_idle_culler --timeout=3600

JupyterHub stops a managed service with SIGINT, waits 30 s, then sends SIGTERM and waits 30 s
more. A hub started in the background (a non-interactive shell's `&`, some container inits)
hands its services SIGINT ignored, and Python keeps it ignored: each service then costs the
hub's shutdown 30 s. This restores SIGINT (and makes SIGTERM the same KeyboardInterrupt, which
services written for a terminal already handle), then runs the module as `python -m` would.
"""

from __future__ import annotations

import runpy
import signal
import sys


def interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit("usage: python -m kubelab.spawner.hub_service MODULE [ARGS...]")
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, interrupt)
    sys.argv = argv
    try:
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
