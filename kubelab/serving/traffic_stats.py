"""Each service's recent traffic as the proxy sees it: requests per second, latency, errors.

The Jupyter server's proxy (`/kubelab/services/<id>/`) is on the path of every request a user
sends to a service, so it measures them there, in memory, over a rolling window (the last
`WINDOW` seconds): nothing to install in the model server, and the sidebar's figures are what
the user experienced, the proxy's hop included. A service id names one version, so the figures
are per version. A restart of the server starts the figures again.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOW = 60.0
MOST = 50_000  # samples kept per service: about 830 requests/s over the window, then the oldest go


@dataclass(frozen=True)
class Sample:
    at: float  # monotonic seconds
    latency: float  # seconds
    error: bool  # the proxy or the service failed (a 5xx, or no answer)


class TrafficWindow:
    """One service's requests of the last `window` seconds."""

    def __init__(self, window: float = WINDOW, most: int = MOST, started: float = 0.0) -> None:
        self.window = window
        self.started = started
        self.samples: deque[Sample] = deque(maxlen=most)

    def record(self, at: float, latency: float, error: bool) -> None:
        self.samples.append(Sample(at, max(latency, 0.0), error))

    def summary(self, now: float) -> dict[str, Any]:
        """`{window_s, requests, rate, p50_ms, p95_ms, errors}`; the rate is over the time the
        window has been open (at least a second), so a fresh service's first requests count
        at their real pace, not spread over a minute. Latencies are None without requests."""
        while self.samples and self.samples[0].at <= now - self.window:
            self.samples.popleft()
        latencies = sorted(sample.latency for sample in self.samples)
        span = min(self.window, max(now - self.started, 1.0))
        return {
            "window_s": self.window,
            "requests": len(latencies),
            "rate": round(len(latencies) / span, 3),
            "p50_ms": _percentile_ms(latencies, 0.50),
            "p95_ms": _percentile_ms(latencies, 0.95),
            "errors": sum(1 for sample in self.samples if sample.error),
        }


def _percentile_ms(ordered: list[float], q: float) -> float | None:
    """Nearest rank: a latency some request really had."""
    if not ordered:
        return None
    return round(ordered[max(math.ceil(q * len(ordered)) - 1, 0)] * 1000.0, 2)


class TrafficStats:
    """The windows of every service the proxy forwarded to, by service id."""

    def __init__(self, window: float = WINDOW, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self.windows: dict[str, TrafficWindow] = {}

    def record(self, service_id: str, latency: float, error: bool) -> None:
        now = self.clock()
        window = self.windows.get(service_id)
        if window is None:
            window = self.windows[service_id] = TrafficWindow(self.window, started=now - latency)
        window.record(now, latency, error)

    def view(self, service_id: str) -> dict[str, Any]:
        """The service's summary; a service nobody has called yet has zero requests."""
        window = self.windows.get(service_id)
        now = self.clock()
        return (window or TrafficWindow(self.window, started=now)).summary(now)

    def forget(self, service_id: str) -> None:
        """A deleted service's figures go with it."""
        self.windows.pop(service_id, None)
