"""A server's CPU and memory samples of the user's running Kubernetes runs, whether or not a
view follows them: the metrics API keeps no history, so what is not read while a run runs is
lost.

One daemon thread lists the PodMetrics of the namespace once an interval (the user's label
selector: one request however many runs are live), groups them by run and hands each running
run its reading (`dcgm.LiveSamples.take`, which appends it to the run's `system.jsonl`). The
running runs are those the watcher's cache holds pods of; a run that ended is skipped (its file
is written whole at its end, dcgm.py). Where the API is absent, refused or unavailable, each run
says so once and the list is asked again after 1, 3, 7, ... intervals (at most a minute apart),
not every interval. Views then read the file; a process that watches nothing (the CLI) has no
sampler, and a view's read there lists the run's own pods (`refresh`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubelab.backends.kubernetes import builders, dcgm, names, pod_metrics
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.watcher import Watcher
from kubelab.records import RunDirectory
from kubelab.spec import ExperimentSpec
from kubelab.system_metrics import DEFAULT_INTERVAL, interval_from_env

log = logging.getLogger(__name__)
MAX_BACKOFF = 60.0  # seconds between two lists at most while the metrics API fails
JOIN = 1.5  # seconds `close` waits for the thread (a list in flight ends by its own timeout)


class MetricsSampler:
    def __init__(
        self, live: dcgm.LiveSamples, target: Callable[[RunDirectory, ExperimentSpec], builders.Target]
    ) -> None:
        self.live = live  # the running runs' samples (the view's DCGM ones too)
        self.target = target  # the run's Job name (Prometheus's pod names)
        self.rounds = 0  # intervals in which there were running runs to sample
        self._skip = 0  # rounds left before the next list, while the API fails
        self._failures = 0
        self._why: str | None = None  # why the last list gave nothing
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(
        self,
        api: KubeApi,
        user: str,
        watcher: Callable[[], Watcher | None],
        find: Callable[[str], RunDirectory | None],
    ) -> None:
        """Sample every interval the runs the watcher sees pods of (`find`: a run id's directory)."""
        if self.running:
            return
        self._stop.clear()
        selector = names.user_selector(user)

        def loop() -> None:
            wait = interval_from_env() or DEFAULT_INTERVAL
            while not self._stop.wait(wait):
                seen = watcher()
                wait = interval_from_env() or DEFAULT_INTERVAL
                if seen is None:
                    continue
                runs = [r for r in map(find, seen.cache.runs("Pod")) if r]
                try:  # the next round comes at the shortest interval of the runs sampled
                    wait = self.sample(api, selector, runs) or wait
                except Exception as exc:  # a run's unreadable file: the next round tries again
                    log.warning("sampling the pods' metrics failed: %s", exc)

        self._thread = threading.Thread(target=loop, daemon=True, name="kubelab-pod-metrics")
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=JOIN)  # `running` stays true if it did not end in time

    def sample(self, api: KubeApi, selector: str, runs: list[RunDirectory]) -> float | None:
        """One round: one list for every run (unless backing off), each run's reading handed in
        (a run whose `system_metrics_interval` is longer takes one every few rounds, one whose
        interval is 0 none). Returns the shortest interval of the runs sampled."""
        every = {run.id: seconds for run in runs if (seconds := self.live.interval(run))}
        runs = [run for run in runs if run.id in every]
        if not runs:
            return None
        self.rounds += 1
        tick = min(every.values())
        if self._skip:
            self._skip -= 1
            grouped: dict[str, list[dict[str, Any]]] | None = None
        else:
            items, self._why = pod_metrics.listed(api, selector)
            self._failures = 0 if items is not None else min(self._failures + 1, 10)
            self._skip = min(2**self._failures - 1, int(MAX_BACKOFF / tick))  # 0 once it answers
            grouped = None if items is None else pod_metrics.by_run(items)
        for run in runs:
            if grouped is None:  # the API failed: each run says why (once: the file keeps it)
                self.live.take(run, (None, self._why))
            else:
                self.live.take(run, pod_metrics.usage(grouped.get(run.id, [])))
        return tick

    def refresh(self, run: RunDirectory, api: KubeApi, user: str) -> None:
        """A view's read: the GPUs from Prometheus, and (with no sampler running) the CPU and
        memory of the run's own pods."""
        job = self.target(run, ExperimentSpec.parse(run.spec())).name
        if self.running:
            self.live.poll(run, api.namespace, job)
        else:
            selector = names.run_selector(user, run.id)
            self.live.poll(run, api.namespace, job, lambda: pod_metrics.read(api, selector))
