"""A hub service that stops idle GPU servers sooner than jupyterhub-idle-culler stops the rest.

GPUs are the scarce thing in a lab; a forgotten notebook holding two of them for a night costs
a colleague a night. jupyterhub-idle-culler applies one timeout to every server, so this small
service runs beside it with a shorter timeout for servers whose `user_options` ask for GPUs.

    python -m kubelab.spawner.culling --timeout 1800 --every 300

It reads `JUPYTERHUB_API_URL` and `JUPYTERHUB_API_TOKEN` as every hub service does, and needs
the scopes `list:users`, `read:users:activity`, `read:servers` and `delete:servers`. It stops at
once on SIGINT (how JupyterHub stops a service) or SIGTERM, even when it inherited SIGINT
ignored (a hub started in the background): JupyterHub would otherwise wait 30 s, then signal
again and wait another 30 s, on every shutdown.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import urllib.request
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from .profiles import parse_resource_gpu

log = logging.getLogger("kubelab.gpu-culler")


def asks_for_gpus(user_options: dict[str, Any] | None) -> bool:
    try:
        return parse_resource_gpu((user_options or {}).get("gpus", 0))[0] > 0
    except Exception:  # options that never validated never started a GPU server
        return False


def idle_gpu_servers(users: list[dict[str, Any]], timeout: float, now: datetime) -> list[tuple[str, str]]:
    """(user, server name) of ready GPU servers idle for longer than `timeout` seconds."""
    found = []
    for user in users:
        for name, server in (user.get("servers") or {}).items():
            if not server.get("ready") or not asks_for_gpus(server.get("user_options")):
                continue
            last = server.get("last_activity") or server.get("started")
            if not last:
                continue
            idle = (now - datetime.fromisoformat(last.replace("Z", "+00:00"))).total_seconds()
            if idle > timeout:
                found.append((user["name"], name))
    return found


def _request(method: str, url: str, token: str) -> Any:
    request = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
    return json.loads(body) if body else None


def cull_once(api_url: str, token: str, timeout: float) -> list[tuple[str, str]]:
    users = _request("GET", f"{api_url.rstrip('/')}/users?state=ready", token)
    if isinstance(users, dict):  # paginated answer
        users = users.get("items", [])
    culled = idle_gpu_servers(users, timeout, datetime.now(timezone.utc))
    for user, server in culled:
        log.info("stopping idle GPU server %s/%s", user, server)
        path = f"/users/{quote(user)}/servers/{quote(server)}" if server else f"/users/{quote(user)}/server"
        _request("DELETE", api_url.rstrip("/") + path, token)
    return culled


class Stopped(Exception):
    """Raised by the signal handler wherever the culler is (waiting, or in a request)."""


def stop_on_signals() -> None:
    def stop(signum: int, frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM):  # installed even over an inherited SIG_IGN
        signal.signal(sig, stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubelab.spawner.culling", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--timeout", type=float, default=1800, help="idle seconds before a GPU server stops")
    parser.add_argument("--every", type=float, default=300, help="seconds between checks")
    parser.add_argument("--once", action="store_true", help="check once and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    api_url, token = os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"]
    stop_on_signals()
    idle = threading.Event()  # never set: a wait that a signal interrupts at once
    try:
        while True:
            try:
                cull_once(api_url, token, args.timeout)
            except OSError as exc:  # the hub restarting: try again next round
                log.warning("could not reach the hub: %s", exc)
            if args.once:
                return 0
            idle.wait(args.every)
    except Stopped as signal_name:
        log.info("stopping on %s", signal_name)
        return 0


if __name__ == "__main__":
    sys.exit(main())
