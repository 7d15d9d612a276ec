"""A list-then-watch copy of one kind of object, kept current for the hub's reads.

The hub's availability (nodes, pods, user namespaces, DRA's ResourceSlices and claims) and its
claim watch read these mirrors instead of listing the cluster on each page view or spawn.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def raw_watch() -> Any:
    """kubernetes_asyncio's Watch, leaving each event's object as the API server's JSON: its
    default builds a V1Pod model per event (~7 ms for a notebook pod), which in a spawn storm
    held the hub's event loop for over a second; `raw_object` is all kubelab reads."""
    from kubernetes_asyncio import watch

    class RawWatch(watch.Watch):
        def get_return_type(self, func: object) -> Any:
            return None

    return RawWatch()


class Mirror:
    """A list-then-watch copy of one kind of object, restarted from a fresh list on any error."""

    def __init__(
        self,
        list_method: Callable[..., Any],
        on_change: Callable[[str | None, dict[str, Any] | None], None],
        **query: str,
    ) -> None:
        self.list_method = list_method
        self.on_change = on_change
        self.query = query
        self.items: dict[str, dict[str, Any]] = {}
        self.loaded = asyncio.Event()
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self.failed = asyncio.Event()  # set when a list or watch failed (the mirror retries)

    async def changed(self, key: str) -> None:
        """Returns at the next event for `key` or the next fresh list (anything may have changed)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(key, []).append(waiter)
        try:
            await waiter
        finally:
            waiting = self._waiters.get(key, [])
            if waiter in waiting:
                waiting.remove(waiter)
            if not waiting:
                self._waiters.pop(key, None)

    def _changed(self, key: str | None) -> None:
        self.on_change(key, self.items.get(key) if key else None)
        for waiting in [self._waiters.get(key, [])] if key else list(self._waiters.values()):
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)

    @staticmethod
    def key(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta.get('namespace', '')}/{meta['name']}"

    async def run(self) -> None:
        delay = 0.1
        while True:
            try:
                response = await self.list_method(_preload_content=False, **self.query)
                listing = json.loads(await response.read())
                self.items = {self.key(o): o for o in listing["items"]}
                self.loaded.set()
                self._changed(None)  # everything may have changed
                stream = raw_watch()
                async with stream.stream(
                    self.list_method,
                    _preload_content=False,
                    timeout_seconds=300,
                    resource_version=listing["metadata"]["resourceVersion"],
                    **self.query,
                ) as events:
                    async for event in events:
                        obj = event["raw_object"]
                        if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                            continue
                        key = self.key(obj)
                        if event["type"] == "DELETED":
                            self.items.pop(key, None)
                        else:
                            self.items[key] = obj
                        self._changed(key)
                        delay = 0.1
            except asyncio.CancelledError:
                raise
            except Exception:  # a dropped watch or an API hiccup: list again after a pause
                self.failed.set()
                log.warning("watch of %s failed; listing again", self.list_method.__name__, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30)
