"""A hub service that stops GPU servers whose GPUs sit idle, even with a live kernel.

GPUs are the scarce thing in a lab; a forgotten notebook holding two of them for a night costs
a colleague a night, and its kernel looks alive to jupyterhub-idle-culler the whole time. So
this service watches what the GPUs do (`gpu_usage`: NVML on the local hub, DCGM through
Prometheus on a cluster): a GPU server whose GPUs stay under the threshold for the group's
allowance (`gpu_idleness`; default 30 min under 5%) is warned in JupyterLab, with "Keep
running" (which restarts its clock once), then stopped. A server no source can speak for
falls back to activity: stopped after `--timeout` seconds without any (kernels, terminals
and VS Code all report activity to the hub). CPU servers are left to jupyterhub-idle-culler.

    python -m kubelab.spawner.culling --source nvml --servers-url http://127.0.0.1:8000

It reads `JUPYTERHUB_API_URL` and `JUPYTERHUB_API_TOKEN` as every hub service does, and needs
the scopes `list:users`, `read:users:activity`, `read:servers`, `delete:servers`,
`read:groups` and `access:servers` (to leave the warning on the user's server). It stops at
once on SIGINT (how JupyterHub stops a service) or SIGTERM, even when it inherited SIGINT
ignored (a hub started in the background).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from kubelab.errors import ValidationError

from .gpu_idleness import IdlePolicy, IdleTracker, ServerKey, parse_idle_policy
from .gpu_usage import GpuUsage
from .profiles import parse_resource_gpu

log = logging.getLogger("kubelab.gpu-culler")


def asks_for_gpus(user_options: dict[str, Any] | None) -> bool:
    try:
        return parse_resource_gpu((user_options or {}).get("gpus", 0))[0] > 0
    except Exception:  # options that never validated never started a GPU server
        return False


def idle_for(server: dict[str, Any], now: datetime) -> float | None:
    """Seconds since the server's last activity (or start), per the hub."""
    last = server.get("last_activity") or server.get("started")
    if not last:
        return None
    return (now - datetime.fromisoformat(last.replace("Z", "+00:00"))).total_seconds()


def gpu_servers(users: list[dict[str, Any]]) -> dict[ServerKey, dict[str, Any]]:
    """(user, server name) -> the hub's model of each ready server that asked for GPUs."""
    return {
        (user["name"], name): server
        for user in users
        for name, server in (user.get("servers") or {}).items()
        if server.get("ready") and asks_for_gpus(server.get("user_options"))
    }


def idle_gpu_servers(users: list[dict[str, Any]], timeout: float, now: datetime) -> list[ServerKey]:
    """Ready GPU servers without activity for longer than `timeout` seconds (the fallback)."""
    return [key for key, server in gpu_servers(users).items() if (idle_for(server, now) or 0) > timeout]


class Hub:
    """The hub's REST API and, through its proxy, the users' servers, with the service token."""

    def __init__(self, api_url: str, token: str, servers_url: str | None = None) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.servers_url = (servers_url or "").rstrip("/")

    def request(self, method: str, url: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"token {self.token}", "Content-Type": "application/json"}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            reply = response.read()
        return json.loads(reply) if reply else None

    def users(self) -> list[dict[str, Any]]:
        users = self.request("GET", f"{self.api_url}/users?state=ready")
        return list(users.get("items", []) if isinstance(users, dict) else users)

    def group_properties(self) -> dict[str, dict[str, Any]]:
        groups = self.request("GET", f"{self.api_url}/groups")
        items = groups.get("items", []) if isinstance(groups, dict) else groups
        return {g["name"]: g.get("properties") or {} for g in items}

    def stop(self, key: ServerKey) -> None:
        user, server = quote(key[0]), quote(key[1])
        path = f"/users/{user}/servers/{server}" if server else f"/users/{user}/server"
        self.request("DELETE", self.api_url + path)

    def notice_url(self, server: dict[str, Any]) -> str | None:
        if not self.servers_url or not server.get("url"):
            return None
        return f"{self.servers_url}{server['url'].rstrip('/')}/kubelab/api/idle-notice"

    def notice(self, server: dict[str, Any], method: str, body: Any = None) -> Any:
        url = self.notice_url(server)
        return None if url is None else self.request(method, url, body)


@dataclass
class Culler:
    hub: Hub
    usage: GpuUsage | None
    default: IdlePolicy = field(default_factory=IdlePolicy)
    timeout: float = 1800.0  # activity fallback, seconds
    tracker: IdleTracker = field(default_factory=IdleTracker)
    clock: Callable[[], float] = time.time

    def policies(self) -> dict[str, IdlePolicy]:
        """Each group's `gpu_idle` over the defaults; a bad one is logged and the default used
        (the hub refuses it when the group spawns, by the same parser)."""
        found: dict[str, IdlePolicy] = {}
        try:
            groups = self.hub.group_properties()
        except (OSError, ValueError) as exc:
            log.warning("could not read the groups' policies: %s", exc)
            return found
        for name, properties in groups.items():
            try:
                found[name] = parse_idle_policy(
                    properties.get("gpu_idle"), f"groups.{name}.gpu_idle", self.default
                )
            except ValidationError as exc:
                log.warning("%s; using the default", exc.message())
        return found

    def round(self) -> dict[ServerKey, str]:
        """One look at every GPU server: what was decided for each ("busy", "warn", "cull", ...)."""
        now = self.clock()
        servers = gpu_servers(self.hub.users())
        self.tracker.forget_except(set(servers))
        policies = self.policies() if servers else {}
        utilisation: dict[ServerKey, float] = {}
        if self.usage is not None and servers:
            try:
                utilisation = self.usage.utilisation(servers)
            except Exception as exc:  # a source down must not stop a thing: fall back to activity
                log.warning("could not read GPU utilisation from %s: %s", self.usage.name, exc)
        decided: dict[ServerKey, str] = {}
        for key, server in servers.items():
            group = str((server.get("user_options") or {}).get("group") or "public")
            policy = policies.get(group, self.default)
            self._answered(key, server, now)
            verdict = self.tracker.observe(key, now, utilisation.get(key), policy)
            if verdict == "unknown":
                seconds = idle_for(server, datetime.fromtimestamp(now, timezone.utc))
                verdict = "cull" if seconds is not None and seconds > self.timeout else "unknown"
            elif verdict == "warn":
                self._warn(key, server, now, policy)
            elif verdict == "busy":
                self._withdraw(key, server)
            if verdict == "cull":
                log.info("stopping idle GPU server %s/%s", *key)
                self.hub.stop(key)
            decided[key] = verdict
        return decided

    def _warn(self, key: ServerKey, server: dict[str, Any], now: float, policy: IdlePolicy) -> None:
        stop_at = now + policy.warn_minutes * 60
        clock = datetime.fromtimestamp(stop_at, timezone.utc).strftime("%H:%M UTC")
        message = (
            f"This server's GPUs have been under {policy.threshold:g}% busy for "
            f"{policy.minutes - policy.warn_minutes:g} minutes. It will be stopped at {clock} to free "
            "them for others, unless you keep it running."
        )
        try:
            self.hub.notice(server, "PUT", {"message": message, "deadline": stop_at})
        except (OSError, ValueError) as exc:
            log.warning("could not warn %s/%s: %s", *key, exc)

    def _answered(self, key: ServerKey, server: dict[str, Any], now: float) -> None:
        """A "Keep running" given since the warning restarts the clock (once: the notice goes)."""
        warned = self.tracker.warned(key)
        if warned is None:
            return
        try:
            notice = (self.hub.notice(server, "GET") or {}).get("notice") or {}
        except (OSError, ValueError) as exc:
            log.warning("could not read %s/%s's answer: %s", *key, exc)
            return
        if notice.get("kept") and self.tracker.keep(key, now):
            log.info("%s/%s keeps running at its user's request", *key)
            self._withdraw(key, server)

    def _withdraw(self, key: ServerKey, server: dict[str, Any]) -> None:
        try:
            self.hub.notice(server, "DELETE")
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                log.warning("could not withdraw %s/%s's warning: %s", *key, exc)
        except (OSError, ValueError) as exc:
            log.warning("could not withdraw %s/%s's warning: %s", *key, exc)


class Stopped(Exception):
    """Raised by the signal handler wherever the culler is (waiting, or in a request)."""


def stop_on_signals() -> None:
    def stop(signum: int, frame: object) -> None:
        raise Stopped(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM):  # installed even over an inherited SIG_IGN
        signal.signal(sig, stop)


def open_usage(source: str, prometheus_url: str | None, every: float) -> GpuUsage | None:
    """The utilisation source `--source` names; `auto`: Prometheus when a URL is given, else
    NVML when this machine has it, else none (activity only)."""
    if source == "none":
        return None
    if source in ("prometheus", "auto") and prometheus_url:
        from .gpu_usage import PrometheusUsage, hub_notebook_pods

        return PrometheusUsage(prometheus_url, every, hub_notebook_pods())
    if source == "prometheus":
        raise SystemExit("--source prometheus needs --prometheus-url")
    try:
        import pynvml

        from kubelab.backends.local.gpus import GpuAllocator

        from .gpu_usage import NvmlUsage

        return NvmlUsage(pynvml, GpuAllocator(gpus=[]).holdings)
    except Exception as exc:  # no NVML library or driver on this machine
        if source == "nvml":
            raise SystemExit(f"--source nvml: NVML is not usable here ({exc})") from None
        log.info("no GPU utilisation source (%s): GPU servers are culled by activity", exc)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubelab.spawner.culling", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds without activity, where no source tells"
    )
    parser.add_argument("--every", type=float, default=300, help="seconds between checks")
    parser.add_argument("--once", action="store_true", help="check once and exit")
    parser.add_argument("--source", choices=("auto", "nvml", "prometheus", "none"), default="auto")
    parser.add_argument("--prometheus-url", help="a Prometheus scraping NVIDIA's DCGM exporter")
    parser.add_argument("--servers-url", help="the hub's public URL, to warn users on their servers")
    parser.add_argument(
        "--threshold", type=float, default=IdlePolicy.threshold, help="idle under this GPU %%"
    )
    parser.add_argument(
        "--minutes", type=float, default=IdlePolicy.minutes, help="idle minutes before a stop"
    )
    parser.add_argument(
        "--warn-minutes", type=float, default=IdlePolicy.warn_minutes, help="warning before it"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        default = parse_idle_policy(
            {"threshold": args.threshold, "minutes": args.minutes, "warn_minutes": args.warn_minutes}, "--"
        )
    except ValidationError as exc:
        parser.error("; ".join(str(f) for f in exc.fields))
    api_url, token = os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"]
    stop_on_signals()
    idle = threading.Event()  # never set: a wait that a signal interrupts at once
    try:
        usage = open_usage(args.source, args.prometheus_url, args.every)
        culler = Culler(Hub(api_url, token, args.servers_url), usage, default, args.timeout)
        while True:
            try:
                culler.round()
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
