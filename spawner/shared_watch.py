"""The hub's watches: one of availability (nodes, pods, user namespaces), read by every form
view, admission, metrics scrape and returning spawn, and one of kubelab's claims, which first
spawns wait on to be bound.

The hub serves all users on one event loop, so the watches are kept per loop: a page view or a
spawn reads a watch's memory (no API call per request), and the first use starts it.
"""

from __future__ import annotations

import asyncio
import contextlib

from kubespawner.clients import shared_client

from . import metrics
from .availability import ClusterAvailability
from .labels import MANAGED_BY
from .mirror import Mirror
from .profiles import Catalog

_watches: dict[asyncio.AbstractEventLoop, ClusterAvailability] = {}
_catalogs: list[Catalog] = []
_claims: dict[asyncio.AbstractEventLoop, tuple[Mirror, asyncio.Task[None]]] = {}


def hub_watch(catalog: Catalog) -> ClusterAvailability:
    """This hub's watch (created, not started, on first use), counting by `catalog`."""
    loop = asyncio.get_running_loop()
    watch = _watches.get(loop)
    if watch is None:
        watch = _watches[loop] = ClusterAvailability(
            shared_client("CoreV1Api"), catalog, shared_client("CustomObjectsApi")
        )
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


def claim_watch() -> Mirror:
    """This hub's mirror of the claims kubelab made, in every namespace (started on first use):
    a first spawn waits on it instead of listing and watching its namespace's claims itself."""
    loop = asyncio.get_running_loop()
    found = _claims.get(loop)
    if found is None:
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        core = shared_client("CoreV1Api")
        mirror = Mirror(
            core.list_persistent_volume_claim_for_all_namespaces, lambda *_: None, label_selector=selector
        )
        found = _claims[loop] = (mirror, loop.create_task(mirror.run()))
    return found[0]


async def stop_watches() -> None:
    for key in list(_watches):
        await _watches.pop(key).stop()
    for key in list(_claims):
        _, task = _claims.pop(key)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


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
