"""GPU-hours and mean GPU utilisation per user and group on the local hub's /hub/metrics.

- `jupyterhub_kubelab_gpu_hours_total{gpu_type, group, user}`: GPUs (or shares of one) the
  machine ledger says each notebook server holds, summed scrape by scrape (`metrics.GpuHours`).
- `jupyterhub_kubelab_gpu_utilisation_percent{group, user}`: the mean over those GPUs of the
  server's process tree's utilisation since the last reading, from NVML's per-process
  accounting (`gpu_usage.NvmlUsage`, as the GPU culler reads it).

Whose a holding is comes from the hub, never from the ledger alone (any user's run writes it):
a ledger entry counts for a server only under the name the hub gave the server's holding and
with the pid the hub started it as. The ledger and NVML are read in a thread at most once per
`TTL` (`utilisation_metrics.Refreshed`): a scrape, on the hub's event loop, never waits on them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .gpu_idleness import ServerKey
from .gpu_usage import NvmlUsage
from .metrics import GpuHours
from .utilisation_metrics import TTL, Refreshed, family

log = logging.getLogger("kubelab.hub-metrics")

Owner = tuple[str, str]  # (group, user)


class LocalServer(NamedTuple):
    """What the hub knows of a running server: the pid it started, its ledger name, its group."""

    pid: int
    run: str
    group: str


class Usage(NamedTuple):
    held: dict[tuple[str, str, str], float]  # (gpu_type, group, user) -> GPUs held
    utilisation: dict[Owner, float] | None  # None where NVML cannot tell


def held(
    devices: list[dict[str, Any]],
    holdings: dict[str, tuple[int, list[int]]],
    servers: dict[ServerKey, LocalServer],
) -> dict[tuple[str, str, str], float]:
    """GPUs held per (type, group, user): a whole GPU counts 1, a share its fraction; only the
    ledger entries that are the hub's servers' own (their name and pid)."""
    result: dict[tuple[str, str, str], float] = {}
    for (user, _), server in servers.items():
        if holdings.get(server.run, (None, []))[0] != server.pid:
            continue
        for device in devices:
            amount = 1.0 if device.get("holder") == server.run else 0.0
            amount += sum(float(s["share"]) for s in device.get("shares") or [] if s.get("run") == server.run)
            if amount:
                key = (str(device["name"]), server.group, user)
                result[key] = result.get(key, 0.0) + amount
    return result


class LocalUsage:
    """The ledger and NVML read together, for the hub's servers as last seen by a scrape."""

    def __init__(self, allocator: Any, nvml: NvmlUsage | None, ttl: float = TTL) -> None:
        self.allocator = allocator
        self.nvml = nvml
        self.servers: dict[ServerKey, LocalServer] = {}
        self.answer = Refreshed(self.read, ttl, "the GPU ledger and NVML")

    def read(self) -> Usage:
        servers = dict(self.servers)
        holdings = self.allocator.holdings()
        counted = held(self.allocator.snapshot()["devices"], holdings, servers)
        if self.nvml is None:
            return Usage(counted, None)
        mine = {
            (server.group, user, name): holdings[server.run]
            for (user, name), server in servers.items()
            if holdings.get(server.run, (None, []))[0] == server.pid
        }
        per_owner: dict[Owner, list[float]] = {}
        for (group, user, _), values in self.nvml.readings(mine, holdings).items():
            per_owner.setdefault((group, user), []).extend(values)
        return Usage(counted, {key: sum(v) / len(v) for key, v in per_owner.items()})


class LocalCollector(Collector):
    """`servers()` (the hub's running servers, read on the event loop: in memory, cheap) is
    handed to the next reading; a scrape exports what the last reading found."""

    def __init__(
        self,
        usage: LocalUsage,
        servers: Callable[[], dict[ServerKey, LocalServer]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.usage = usage
        self.servers = servers
        self.gpu_hours = GpuHours(clock)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        self.usage.servers = self.servers()
        found = self.usage.answer.get()
        yield self.gpu_hours.observe(found.held if found else {})
        if self.usage.nvml is not None:
            yield family(found.utilisation if found else None)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())


running: dict[ServerKey, LocalServer] = {}  # the local spawners' servers, as they start and stop
_registered: list[LocalCollector] = []
_lock = threading.Lock()


def open_nvml(allocator: Any) -> NvmlUsage | None:
    try:
        import pynvml

        return NvmlUsage(pynvml, allocator.holdings)
    except Exception as exc:  # no NVML library or driver on this machine
        log.info("NVML is not usable here (%s): /hub/metrics exports no GPU utilisation", exc)
        return None


def register(allocator: Any, nvml: Callable[[Any], NvmlUsage | None] = open_nvml) -> LocalCollector:
    """Once per hub process, in the registry /hub/metrics exports."""
    with _lock:
        if not _registered:
            collector = LocalCollector(LocalUsage(allocator, nvml(allocator)), lambda: dict(running))
            REGISTRY.register(collector)
            _registered.append(collector)
        return _registered[0]
