"""Back-pressure for a spawn storm: spawns queue for their turn instead of failing.

A class's first Monday morning starts hundreds of spawns within a minute. Each prepares its
user's namespace with a burst of API requests; all at once they overload the API server, which
answers 429 and 5xx until spawns time out. So each hub lets at most `limit` spawns do that setup
at once, in arrival order; the others wait, and their progress page says how many are ahead.
Waiting costs nothing but the queue's place (a future), and a cancelled spawn leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio.client.rest import ApiException

from .retry import BUSY


class SpawnQueue:
    """A FIFO limit on concurrent setups; `ahead(ticket)` is a waiting spawn's position."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.running = 0
        self.waiting: deque[asyncio.Future[None]] = deque()

    def ahead(self, ticket: asyncio.Future[None] | None) -> int | None:
        """How many spawns wait before `ticket`'s; None when it is not waiting."""
        if ticket is None or ticket.done():
            return None
        try:
            return self.waiting.index(ticket)
        except ValueError:
            return None

    async def _acquire(self, ticket: asyncio.Future[None]) -> None:
        if self.running < self.limit and not self.waiting:
            self.running += 1
            ticket.set_result(None)
            return
        self.waiting.append(ticket)
        try:
            await ticket
        except asyncio.CancelledError:
            if ticket in self.waiting:
                self.waiting.remove(ticket)
            elif ticket.done() and not ticket.cancelled():  # handed a turn as it was cancelled
                self._release()
            raise

    def _release(self) -> None:
        while self.waiting:
            ticket = self.waiting.popleft()
            if not ticket.done():
                ticket.set_result(None)  # the turn passes on; `running` stays the same
                return
        self.running -= 1

    @contextlib.asynccontextmanager
    async def turn(self, ticket: asyncio.Future[None]) -> AsyncIterator[None]:
        await self._acquire(ticket)
        try:
            yield
        finally:
            self._release()


_queues: dict[asyncio.AbstractEventLoop, SpawnQueue] = {}


def hub_queue(limit: int) -> SpawnQueue:
    """This hub's queue (one per event loop); a changed limit applies from the next spawn on."""
    loop = asyncio.get_running_loop()
    queue = _queues.get(loop)
    if queue is None:
        queue = _queues[loop] = SpawnQueue(limit)
    queue.limit = max(1, limit)
    return queue


class BackPressure:
    """Mixed into KubeSpawner (before it): a queued spawn's place on its progress page, and a
    pod create that meets a busy API server tried again by KubeSpawner's own jittered backoff.
    The spawner sets `_ticket` when it joins the queue and records a busy answer in `_busy`."""

    _start_future: Any
    _busy: ApiException | None

    if TYPE_CHECKING:  # KubeLabSpawner's property

        @property
        def kubelab_mode(self) -> bool: ...

    spawn_concurrency: int

    async def _make_create_pod_request(self, pod: Any, request_timeout: float) -> bool:
        """KubeSpawner's create, tried again (by its backoff, which jitters) on a busy answer."""
        try:
            return bool(await super()._make_create_pod_request(pod, request_timeout))  # type: ignore[misc]
        except ApiException as exc:
            if exc.status in BUSY:
                self._busy = exc
                return False
            raise

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        """KubeSpawner's events, preceded by the spawn's place in the hub's queue."""
        shown, started = None, self._start_future
        while self.kubelab_mode and getattr(self, "_ticket", None) is None and started and not started.done():
            await asyncio.sleep(0.2)  # not at the queue yet
        while (ahead := hub_queue(self.spawn_concurrency).ahead(getattr(self, "_ticket", None))) is not None:
            if ahead != shown:
                shown = ahead
                yield {"progress": 2, "message": f"starting, {ahead} ahead of you"}
            await asyncio.sleep(0.5)
        async for event in super().progress():  # type: ignore[misc]  # KubeSpawner's (untyped)
            yield event
