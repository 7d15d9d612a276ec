"""Work after a run ends (keep its logs, delete its helpers), done on one background thread.

A watch callback must return quickly, and a run's pods may be deleted soon after it ends,
so the backend queues each ended run here and a single thread handles them in order.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path

from kubelab.records import RunDirectory

log = logging.getLogger(__name__)


class Chores:
    def __init__(self, finish: Callable[[RunDirectory], None]) -> None:
        self._finish = finish
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def add(self, run: RunDirectory) -> None:
        self._queue.put(run.path)
        self.ensure()

    def ensure(self) -> None:
        """Start the thread unless it runs (it is started again after a close)."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._work, daemon=True, name="kubelab-kube-chores")
            self._thread.start()

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)
            self._thread = None

    def _work(self) -> None:
        while True:
            path = self._queue.get()
            if path is None:
                return
            try:
                self._finish(RunDirectory(path))
            except Exception as exc:
                log.warning("cleanup of %s failed: %s", path, exc)
