"""Long-lived responses (log followers, the event stream) with limits of their own.

A follower waits most of its life. Waiting on Jupyter's default thread pool (a handful of
threads on a small machine) let seven `logs?follow=1` clients block every other request that
needs a thread (`/resources`, `stop`). Here each kind of stream has a slot count and its own
threads, so other requests never queue behind streams and one more stream is a clear 429.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from kubelab.errors import TooMany

IDLE = 0.1  # seconds between looks at a followed log with nothing new


def limit_from_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


class StreamSlots:
    """At most `limit` open streams of one kind on this server (a server serves one user)."""

    def __init__(self, kind: str, limit: int, threads: bool = False):
        self.kind, self.limit, self.open = kind, limit, 0
        self.pool = ThreadPoolExecutor(limit, thread_name_prefix=f"kubelab-{kind}") if threads else None

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Runs on the IOLoop's thread only, so the count needs no lock."""
        if self.open >= self.limit:
            raise TooMany(
                f"{self.open} {self.kind} are open, the most this server allows "
                f"(close one, or raise KUBELAB_MAX_{self.kind.upper().replace(' ', '_')})"
            )
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
