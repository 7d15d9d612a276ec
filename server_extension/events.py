"""The live event stream: one watcher of the run directories, many subscribers.

Clients (the sidebar, widgets under cells, `kubelab logs -f`) subscribe once and
never poll per experiment. The hub itself looks at the files of unfinished runs a few
times a second; a finished run costs nothing.

Looking means file reads and, on Kubernetes, API calls, so it happens in the hub's own
thread; only handing the events to subscribers happens on the server's event loop, and
each event is encoded once, in that thread, however many streams carry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubelab.experiments import Experiments
from kubelab.logfiles import read_from
from kubelab.pipelines.service import PipelineWatcher
from kubelab.records import RunDirectory
from kubelab.schedules.scheduler import SchedulerKeeper
from kubelab.schedules.watcher import ScheduleWatcher
from kubelab.serving.service import Services
from kubelab.serving.watcher import ServiceWatcher
from kubelab.sweeps.watcher import SweepWatcher

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    # experiment, metrics, deleted, sweep, pipeline, schedule(_deleted), service(_deleted), tensorboard
    kind: str
    data: dict[str, Any]
    text: str = field(default="", compare=False)  # the SSE message, encoded once

    @classmethod
    def of(cls, kind: str, data: dict[str, Any]) -> Event:
        return cls(kind, data, f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n")


class EventHub:
    def __init__(self, lab: Experiments, interval: float = 0.2, backlog: int = 1000):
        self.lab = lab
        self.interval = interval
        self.backlog = backlog
        self.subscribers: set[asyncio.Queue[Event | None]] = set()
        self.metric_offsets: dict[str, int] = {}
        # The index's record objects as last published: the index replaces a record when it
        # re-reads a run, so `is not` finds every change, whoever refreshed the index (a
        # `GET experiments` refreshes it too, and must not swallow the change).
        self.seen: dict[str, dict[str, Any]] = {}
        self.task: asyncio.Task[None] | None = None
        # One thread, so looks never overlap and the metric offsets need no lock.
        self.executor: ThreadPoolExecutor | None = None
        # Sweeps: `sweep` events, and restarting drivers that died (kubelab/sweeps/service.py).
        self.sweeps = SweepWatcher(lab)
        self.pipelines = PipelineWatcher(lab)  # `pipeline` events; dead drivers
        self.scheduler = SchedulerKeeper(lab)  # the per-user scheduler while a schedule fires here
        self.schedules = ScheduleWatcher(lab)  # `schedule` and `schedule_deleted` events
        self.services = ServiceWatcher(Services(lab=lab))  # `service` and `service_deleted` events

    def start(self) -> None:
        if self.task is None:
            self.executor = ThreadPoolExecutor(1, thread_name_prefix="kubelab-events")
            self.sweeps.start()
            self.pipelines.start()
            self.schedules.start()
            self.services.start()
            self.scheduler.keep_alive()
            self.task = asyncio.get_running_loop().create_task(self._run())

    def baseline(self) -> None:
        """Only later changes are events: note what exists now (in the hub's thread)."""
        self.lab.refresh()
        self.seen = {record["id"]: record for record in self.lab.index.records()}
        for run_id in self.seen:
            self.metric_offsets[run_id] = self._metrics_size(run_id)

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = None
        for queue in list(self.subscribers):
            queue.put_nowait(None)  # ends every open stream

    def subscribe(self) -> asyncio.Queue[Event | None]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=self.backlog)
        self.subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event | None]) -> None:
        self.subscribers.discard(queue)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        """Hand an event to every subscriber; on the event loop's thread only."""
        self.deliver(Event.of(kind, data))

    def deliver(self, event: Event) -> None:
        for queue in list(self.subscribers):
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:  # a stalled client: drop it rather than grow without bound
                self.subscribers.discard(queue)
                with contextlib.suppress(asyncio.QueueFull):
                    queue.get_nowait()
                    queue.put_nowait(None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self.baseline)
        except Exception:
            log.exception("kubelab: reading the runs for the event stream failed")
        while True:
            try:
                events = await loop.run_in_executor(self.executor, self.collect)
            except RuntimeError:  # the executor shut down: the server is stopping
                return
            except Exception:  # keep streaming whatever one bad directory does
                log.exception("kubelab: event poll failed")
            else:
                for event in events:
                    self.deliver(event)
            await asyncio.sleep(self.interval)

    def poll(self) -> None:
        """One look, delivered at once (for callers on the loop's thread)."""
        for event in self.collect():
            self.deliver(event)

    def collect(self) -> list[Event]:
        """One look at the runs and sweeps: the events it finds, encoded (blocking; a thread's work)."""
        events: list[Event] = []
        self.lab.refresh()
        current = {record["id"]: record for record in self.lab.index.records()}
        for run_id in self.seen.keys() - current.keys():
            self.metric_offsets.pop(run_id, None)
            events.append(Event.of("deleted", {"id": run_id}))
        for run_id, record in current.items():
            if self.seen.get(run_id) is record:
                continue
            points = self._new_metrics(run_id)
            if points:
                events.append(Event.of("metrics", {"id": run_id, "points": points}))
            events.append(Event.of("experiment", record))
        self.seen = current
        if events:
            self.lab.index.save()
        for record in self.sweeps.poll():
            events.append(Event.of("sweep", record))
        for record in self.pipelines.poll():
            events.append(Event.of("pipeline", record))
        changed, removed = self.schedules.poll()
        events += [Event.of("schedule", record) for record in changed]
        events += [Event.of("schedule_deleted", {"id": schedule_id}) for schedule_id in removed]
        services, gone = self.services.poll()
        events += [Event.of("service", view) for view in services]
        events += [Event.of("service_deleted", {"id": service_id}) for service_id in gone]
        self.scheduler.poll()
        return events

    def _metrics_size(self, run_id: str) -> int:
        try:
            return RunDirectory(self.lab.runs_root / run_id).metrics_file.stat().st_size
        except FileNotFoundError:
            return 0

    def _new_metrics(self, run_id: str) -> list[dict[str, Any]]:
        path = RunDirectory(self.lab.runs_root / run_id).metrics_file
        text, offset = read_from(path, self.metric_offsets.get(run_id, 0))
        complete = text[: text.rfind("\n") + 1]  # a torn last line waits for the next poll
        self.metric_offsets[run_id] = offset - len(text.encode()) + len(complete.encode())
        points = []
        for line in complete.splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                points.append(json.loads(line))
        return points
