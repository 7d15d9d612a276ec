"""The proxy's rolling window of a service's traffic: rate, nearest-rank latencies, errors."""

from __future__ import annotations

from kubelab.serving.traffic_stats import TrafficStats, TrafficWindow


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_service_nobody_called_has_no_requests_and_no_latency() -> None:
    stats = TrafficStats(clock=Clock())
    assert stats.view("iris-v1") == {
        "window_s": 60.0,
        "requests": 0,
        "rate": 0.0,
        "p50_ms": None,
        "p95_ms": None,
        "errors": 0,
    }
    assert stats.windows == {}  # looking creates nothing


def test_rate_percentiles_and_errors_over_the_window() -> None:
    clock = Clock()
    stats = TrafficStats(window=60.0, clock=clock)
    for i in range(20):  # one request every half second, 1..20 ms, the last two failing
        clock.now += 0.5
        stats.record("iris-v1", (i + 1) / 1000.0, error=i >= 18)
    view = stats.view("iris-v1")
    assert view["requests"] == 20 and view["errors"] == 2
    assert view["p50_ms"] == 10.0 and view["p95_ms"] == 19.0
    assert view["rate"] == round(20 / 9.501, 3)  # since the first request began, 9.501 s ago
    assert stats.view("iris-v2")["requests"] == 0  # per version: another id, another window


def test_old_requests_leave_the_window_and_the_rate_spans_it_at_most() -> None:
    clock = Clock()
    stats = TrafficStats(window=60.0, clock=clock)
    stats.record("s", 0.5, error=True)
    clock.now += 61.0
    stats.record("s", 0.002, error=False)
    clock.now += 29.0
    view = stats.view("s")
    assert view["requests"] == 1 and view["errors"] == 0 and view["p95_ms"] == 2.0
    assert view["rate"] == round(1 / 60.0, 3)
    clock.now += 31.0
    assert stats.view("s")["requests"] == 0 and stats.view("s")["p50_ms"] is None
    stats.forget("s")
    assert "s" not in stats.windows


def test_a_burst_in_the_first_second_is_not_counted_as_faster_than_it_was() -> None:
    window = TrafficWindow(window=60.0, started=0.0)
    for _ in range(5):
        window.record(0.01, 0.001, error=False)
    assert window.summary(0.02)["rate"] == 5.0  # over one second at least


def test_the_window_keeps_at_most_its_bound_of_samples() -> None:
    window = TrafficWindow(window=60.0, most=3, started=0.0)
    for i in range(5):
        window.record(float(i), 0.001 * (i + 1), error=False)
    summary = window.summary(5.0)
    assert summary["requests"] == 3 and summary["p50_ms"] == 4.0
