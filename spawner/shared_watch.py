"""One availability watch per hub: every form view, admission and metrics scrape reads it.

The hub serves all users on one event loop, so the watch is kept per loop: a page view or a
spawn reads the watch's memory (no API call per request), and the first use starts it.
"""

from __future__ import annotations

import asyncio
import contextlib

from kubespawner.clients import shared_client

from . import metrics
from .availability import ClusterAvailability
from .profiles import Catalog

_watches: dict[asyncio.AbstractEventLoop, ClusterAvailability] = {}
_catalogs: list[Catalog] = []


def hub_watch(catalog: Catalog) -> ClusterAvailability:
    """This hub's watch (created, not started, on first use), counting by `catalog`."""
    loop = asyncio.get_running_loop()
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = ClusterAvailability(shared_client("CoreV1Api"), catalog)
    watch.catalog = catalog
    return watch


def running_watch() -> ClusterAvailability | None:
    """This hub's watch once it has listed pods and namespaces (None before: callers ask the
    API server instead)."""
    try:
        watch = _watches.get(asyncio.get_running_loop())
    except RuntimeError:
        return None
    if watch is None or not (watch.pods.loaded.is_set() and watch.namespaces.loaded.is_set()):
        return None
    return watch


def remember(catalog: Catalog) -> None:
    """The hub's catalog, for a metrics scrape that comes before any form view."""
    _catalogs[:] = [catalog]


async def stop_watches() -> None:
    for key in list(_watches):
        await _watches.pop(key).stop()


def _metrics_snapshot() -> metrics.Snapshot | None:
    """The current nodes, pods and user namespaces of this hub's availability watch, for
    /hub/metrics (owners from the namespaces the hub labelled, never pod labels). The hub
    serves a scrape on its event loop; the first scrape after a catalog is known starts the
    watch if no spawn form did yet, so the numbers come from the next scrape on."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    watch = _watches.get(loop)
    if watch is None:
        if not _catalogs:
            return None
        watch = hub_watch(_catalogs[-1])
        loop.create_task(_start_quietly(watch))
        return None
    return watch.snapshot()


async def _start_quietly(watch: ClusterAvailability) -> None:
    with contextlib.suppress(Exception):  # the watch retries by itself; a scrape never fails
        await watch.start()


metrics.register(_metrics_snapshot)
