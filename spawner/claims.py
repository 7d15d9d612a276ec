"""Claims that are bound before the pod that mounts them exists.

A pod whose claim of an `Immediate` StorageClass is still unbound is marked unschedulable, and
the scheduler tries it again only after a backoff (a second, then longer): a user's first spawn
waited that long after the provisioner had already bound the claim. So with such a class the
spawner waits for the claims it just created to be Bound, then makes the pod. With
`WaitForFirstConsumer` it does not wait: Kubernetes binds those claims only once a pod using
them is scheduled, so the pod must come first, as Kubernetes intends. A class the hub cannot
read, or no class (`storage_class = ""`), is left to the scheduler as before.

The wait reads one watch of kubelab's claims that the hub's spawns share: a list and a watch per
spawn held one of the client's 100 pooled connections each while its claims waited their turn
to be bound, so in a storm of new users those watches could take every connection and queue
the other spawns' requests behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from kubernetes_asyncio.client.rest import ApiException

from .apply import Applier
from .mirror import raw_watch

DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
IMMEDIATE = "Immediate"
_CLASSES = "/apis/storage.k8s.io/v1/storageclasses"
_TTL = 60.0
_modes: dict[tuple[Any, str | None], tuple[float, str | None]] = {}
log = logging.getLogger(__name__)


def default_class(classes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The class a claim without one gets: the newest marked default (as the API server picks)."""
    marked = [c for c in classes if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS) == "true"]
    return max(marked, key=lambda c: c["metadata"].get("creationTimestamp") or "", default=None)


async def binding_mode(applier: Applier, storage_class: str | None) -> str | None:
    """`Immediate`, `WaitForFirstConsumer`, or None when unknown; read once a minute per hub."""
    key = (asyncio.get_running_loop(), storage_class)
    cached = _modes.get(key)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    mode: str | None = None
    try:
        if storage_class:
            found = await applier.request("GET", f"{_CLASSES}/{storage_class}")
        elif storage_class is None:
            found = default_class((await applier.request("GET", _CLASSES)).get("items") or [])
        else:
            found = None
        mode = None if found is None else str(found.get("volumeBindingMode") or IMMEDIATE)
    except (ApiException, asyncio.TimeoutError):  # no right to read classes: the old behaviour
        log.debug("StorageClass %r unreadable; not waiting for claims", storage_class, exc_info=True)
    _modes[key] = (time.monotonic() + _TTL, mode)
    return mode


def _bound(claim: dict[str, Any]) -> bool:
    return (claim.get("status") or {}).get("phase") == "Bound"


async def wait_bound(api_client: Any, namespace: str, names: list[str], timeout: float) -> bool:
    """Whether the claims `names` are all Bound within `timeout` seconds (False, not an error,
    otherwise: the pod is made anyway and the scheduler takes over). Read from the hub's claim
    watch (kubelab.spawner.shared_watch), which hundreds of first spawns share; a hub that may
    not watch claims in every namespace lists and watches the namespace's own instead."""
    from .shared_watch import claim_watch

    mirror = claim_watch()

    async def until_bound() -> None:
        ready = asyncio.ensure_future(mirror.loaded.wait())
        failed = asyncio.ensure_future(mirror.failed.wait())
        try:
            await asyncio.wait({ready, failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            failed.cancel()
        if not mirror.loaded.is_set():
            await _watch_namespace(api_client, namespace, set(names))
            return
        for key in (f"{namespace}/{name}" for name in names):
            while not _bound(mirror.items.get(key) or {}):
                await mirror.changed(key)

    with contextlib.suppress(asyncio.TimeoutError, ApiException):
        await asyncio.wait_for(until_bound(), timeout)
        return True
    return False


async def _watch_namespace(api_client: Any, namespace: str, waiting: set[str]) -> None:
    """Until the claims `waiting` in `namespace` are Bound, by one list and one watch."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api_client)
    response = await core.list_namespaced_persistent_volume_claim(namespace, _preload_content=False)
    listing = json.loads(await response.read())  # type: ignore[attr-defined]  # raw answer
    waiting.difference_update(c["metadata"]["name"] for c in listing["items"] if _bound(c))
    if not waiting:
        return
    async with raw_watch().stream(
        core.list_namespaced_persistent_volume_claim,
        namespace,
        _preload_content=False,
        resource_version=listing["metadata"]["resourceVersion"],
    ) as events:
        async for event in events:
            claim = event["raw_object"]
            if event["type"] in ("ADDED", "MODIFIED") and _bound(claim):
                waiting.discard(claim["metadata"]["name"])
                if not waiting:
                    return
