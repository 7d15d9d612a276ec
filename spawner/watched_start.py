"""A spawn that ends when the hub's pod watch sees its pod Running, not at KubeSpawner's next poll.

KubeSpawner waits for a created pod to run by looking at its pod reflector after sleeps that
double with jitter (0.2 s up to 5 s), so a spawn learns its pod runs up to a sleep late: in a
storm of returning users that sleep was most of the gap to a pod that already ran. The hub's
availability watch (kubelab.spawner.shared_watch) already receives every pod event, so here a
spawn waits on its own pod's events instead, and KubeSpawner's remaining poll is cancelled.

Only where nothing of KubeSpawner's comes after the pod's create but that poll: no internal
SSL, no Services and no `after_pod_created_hook`, whose work follows the create; and only once
the hub's watch is listed. Otherwise, and for any failure, KubeSpawner's own start decides.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from . import shared_watch


class WatchedStart:
    """Mixed into KubeSpawner (before it): `_start` returns the URL once the pod runs."""

    namespace: str
    pod_name: str
    pod_id: str
    internal_ssl: bool
    services_enabled: bool
    after_pod_created_hook: Any
    _pod_created: asyncio.Event
    _replaced: str | None

    if TYPE_CHECKING:  # KubeSpawner's (untyped)

        def is_pod_running(self, pod: dict[str, Any] | None) -> bool: ...

        def _get_pod_url(self, pod: dict[str, Any]) -> str: ...

    async def _make_create_pod_request(self, pod: Any, request_timeout: float) -> bool:
        watch = shared_watch.running_watch()
        held = (watch.pods.items.get(self._pod_key) or {}) if watch else {}
        created = bool(await super()._make_create_pod_request(pod, request_timeout))  # type: ignore[misc]
        if created:  # never the pod of that name the watch held before this create (replaced)
            self._replaced = (held.get("metadata") or {}).get("uid")
            self._pod_created.set()
        return created

    @property
    def _pod_key(self) -> str:
        return f"{self.namespace}/{self.pod_name}"

    async def _start(self) -> Any:
        self._pod_created = asyncio.Event()
        start = asyncio.ensure_future(super()._start())  # type: ignore[misc]  # KubeSpawner's
        if self.internal_ssl or self.services_enabled or self.after_pod_created_hook:
            return await start
        seen = asyncio.ensure_future(self._running())
        try:
            await asyncio.wait({start, seen}, return_when=asyncio.FIRST_COMPLETED)
            if start.done() or seen.exception() is not None:
                return await start
            start.cancel()  # KubeSpawner is between polls of a pod that already runs
            with contextlib.suppress(asyncio.CancelledError):
                await start
            if start.cancelled():
                pod = seen.result()
                self.pod_id = pod["metadata"]["uid"]
                return self._get_pod_url(pod)
            return start.result()  # it had finished (or failed) as it was cancelled
        finally:
            seen.cancel()
            start.cancel()

    async def _running(self) -> dict[str, Any]:
        """This spawn's pod once it runs, by the watch's events after KubeSpawner created it
        (load_user_options, early in KubeSpawner's start, starts the watch); without a listed
        watch this waits for ever, and KubeSpawner's start decides alone."""
        await self._pod_created.wait()
        watch = shared_watch.running_watch()
        if watch is None:
            await asyncio.get_running_loop().create_future()
        assert watch is not None
        while True:
            pod = watch.pods.items.get(self._pod_key)
            if pod is not None and pod["metadata"].get("uid") != self._replaced and self.is_pod_running(pod):
                return pod
            await watch.pod_changed(self._pod_key)
