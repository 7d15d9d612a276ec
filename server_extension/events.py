"""The live event stream: one watcher of the run directories, many subscribers.

Clients (the sidebar, widgets under cells, `kubelab logs -f`) subscribe once and
never poll per experiment. The hub itself looks at the files of unfinished runs a few
times a second; a finished run costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any

from kubelab.backends.local import read_from
from kubelab.lab import Lab
from kubelab.pipelines.service import PipelineWatcher
from kubelab.sweeps.service import SweepWatcher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    kind: str  # experiment | metrics | deleted | sweep | pipeline | tensorboard
    data: dict[str, Any]


class EventHub:
    def __init__(self, lab: Lab, interval: float = 0.2, backlog: int = 1000):
        self.lab = lab
        self.interval = interval
        self.backlog = backlog
        self.subscribers: set[asyncio.Queue[Event | None]] = set()
        self.metric_offsets: dict[str, int] = {}
        self.task: asyncio.Task | None = None
        # Sweeps: `sweep` events, and restarting drivers that died (kubelab/sweeps/service.py).
        self.sweeps = SweepWatcher(lab)
        self.pipelines = PipelineWatcher(lab)  # `pipeline` events; dead drivers; the scheduler

    def start(self) -> None:
        if self.task is None:
            self.lab.refresh()  # baseline: only later changes are events
            for record in self.lab.index.records():
                self.metric_offsets[record["id"]] = self._metrics_size(record["id"])
            self.sweeps.start()
            self.pipelines.start()
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
        for queue in list(self.subscribers):
            queue.put_nowait(None)  # ends every open stream

    def subscribe(self) -> asyncio.Queue[Event | None]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=self.backlog)
        self.subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self.subscribers.discard(queue)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        event = Event(kind, data)
        for queue in list(self.subscribers):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:  # a stalled client: drop it rather than grow without bound
                self.subscribers.discard(queue)
                with contextlib.suppress(asyncio.QueueFull):
                    queue.get_nowait()
                    queue.put_nowait(None)

    async def _run(self) -> None:
        while True:
            try:
                self.poll()
            except Exception:  # keep streaming whatever one bad directory does
                log.exception("kubelab: event poll failed")
            await asyncio.sleep(self.interval)

    def poll(self) -> None:
        changes = self.lab.refresh()
        for run_id in changes.deleted:
            self.metric_offsets.pop(run_id, None)
            self.publish("deleted", {"id": run_id})
        for record in changes.updated:
            points = self._new_metrics(record["id"])
            if points:
                self.publish("metrics", {"id": record["id"], "points": points})
            self.publish("experiment", record)
        if changes:
            self.lab.index.save()
        for record in self.sweeps.poll():
            self.publish("sweep", record)
        for record in self.pipelines.poll():
            self.publish("pipeline", record)

    def _metrics_size(self, run_id: str) -> int:
        try:
            return (self.lab.runs_root / run_id / "metrics.jsonl").stat().st_size
        except FileNotFoundError:
            return 0

    def _new_metrics(self, run_id: str) -> list[dict[str, Any]]:
        import json

        path = self.lab.runs_root / run_id / "metrics.jsonl"
        text, offset = read_from(path, self.metric_offsets.get(run_id, 0))
        complete = text[: text.rfind("\n") + 1]  # a torn last line waits for the next poll
        self.metric_offsets[run_id] = offset - len(text.encode()) + len(complete.encode())
        points = []
        for line in complete.splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                points.append(json.loads(line))
        return points
