"""GPU utilisation per user and group on the hub's metrics, from a recorded Prometheus answer
(DCGM exporter series, scraped without honorLabels) served by a real HTTP server on loopback.

The collector is exported through prometheus_client's text format, as /hub/metrics does; the
real hub serving it against the real control plane is in test_deploy_cluster.py.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import JsonStandIn
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubelab.spawner import utilisation_metrics
from kubelab.spawner.metrics import LabCollector
from kubelab.spawner.profiles import Catalog
from kubelab.spawner.utilisation_metrics import DcgmUtilisation, Refreshed

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "prometheus_dcgm_util.json").read_text())
CATALOG = Catalog.parse({"gpu_types": [{"name": "A100", "label_value": "A100"}]})
NAME = "jupyterhub_kubelab_gpu_utilisation_percent"


def namespace(name: str, user: str, group: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "kubelab", "kubelab.io/user": user},
            "annotations": {"kubelab.io/group": group},
        }
    }


def pod(ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


NAMESPACES = [namespace("lab-alice", "alice", "vision"), namespace("lab-mallory", "mallory", "public")]
# mallory labels her own run's pod as alice's, in alice's group, to pass her GPU off as alice's
HOSTILE = {"kubelab.io/user": "alice", "kubelab.io/group": "vision"}
PODS = [
    pod("lab-alice", "jupyter-alice", {"kubelab.io/user": "alice"}),
    pod("lab-mallory", "mallory-run-0", HOSTILE),
]  # bob's run ended: the watch no longer sees its pod, though Prometheus still averages it


def scrape(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    text = generate_latest(registry).decode()
    return {
        (s.labels["group"], s.labels["user"]): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == NAME
    }


def scrape_until(registry: CollectorRegistry, ready: Any) -> dict[tuple[str, str], float]:
    """Scrapes until `ready(samples)` (the first scrape only starts the refresh thread)."""
    deadline = time.monotonic() + 30
    samples = scrape(registry)
    while not ready(samples) and time.monotonic() < deadline:
        time.sleep(0.05)
        samples = scrape(registry)
    return samples


def test_utilisation_counts_against_the_namespace_owner_never_the_labels_a_user_sets() -> None:
    with JsonStandIn(lambda path: RECORDED) as prometheus:
        registry = CollectorRegistry()
        utilisation = DcgmUtilisation(prometheus.url, ttl=3600)
        registry.register(LabCollector(lambda: ([], PODS, CATALOG, NAMESPACES), utilisation=utilisation))
        first = scrape(registry)
        samples = scrape_until(registry, bool)
        for _ in range(5):
            assert scrape(registry) == samples
        asked = list(prometheus.paths)
    assert first == {}  # nothing known yet: no zeros while the first answer is on its way
    # alice's two GPUs at 80% and 40.5%; mallory's pod's labels move nothing to alice or vision
    assert samples == {("vision", "alice"): 60.25, ("public", "mallory"): 97.0}
    # one query for seven scrapes within the TTL, for every pod's GPUs at once
    assert len(asked) == 1 and "avg_over_time%28DCGM_FI_DEV_GPU_UTIL%5B300s%5D%29" in asked[0], asked


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_unreachable_prometheus_is_said_once_and_exports_no_zeros(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    utilisation = DcgmUtilisation(closed_port(), ttl=0, timeout=2)
    registry.register(LabCollector(lambda: ([], PODS, CATALOG, NAMESPACES), utilisation=utilisation))
    caplog.set_level(logging.WARNING, logger="kubelab.hub-metrics")
    refreshed = 0
    deadline = time.monotonic() + 30
    while refreshed < 3 and time.monotonic() < deadline:  # three failed refreshes
        at = utilisation.answer.read_at
        assert scrape(registry) == {}
        while utilisation.answer.read_at == at and time.monotonic() < deadline:
            time.sleep(0.02)
        refreshed += 1
    sentences = [r.getMessage() for r in caplog.records if r.name == "kubelab.hub-metrics"]
    assert refreshed == 3 and len(sentences) == 1, sentences
    assert "GPU utilisation from Prometheus at http://127.0.0.1:" in sentences[0]
    assert "exports none until it can" in sentences[0]


def test_a_failure_after_an_answer_drops_the_numbers_and_a_recovery_logs_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[Any] = [[{"metric": {}, "value": [0, "1"]}], OSError("refused"), [], OSError("refused")]
    clock = [0.0]

    def read() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    caplog.set_level(logging.WARNING, logger="kubelab.hub-metrics")
    refreshed = Refreshed(read, ttl=10, what="the recorded source", clock=lambda: clock[0])
    seen = []
    for _ in range(4):
        refreshed.get()
        deadline = time.monotonic() + 30
        while refreshed.busy and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(refreshed.get())
        clock[0] += 10
    assert seen == [[{"metric": {}, "value": [0, "1"]}], None, [], None]
    assert len([r for r in caplog.records if "the recorded source" in r.getMessage()]) == 2


def test_no_prometheus_configured_is_said_and_exports_no_family(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(utilisation_metrics.PROMETHEUS_URL, raising=False)
    caplog.set_level(logging.INFO, logger="kubelab.hub-metrics")
    assert utilisation_metrics.from_environ() is None
    assert [r.getMessage() for r in caplog.records] == [
        "no Prometheus configured (KUBELAB_PROMETHEUS_URL): /hub/metrics exports no GPU utilisation"
    ]
    registry = CollectorRegistry()
    registry.register(LabCollector(lambda: ([], PODS, CATALOG, NAMESPACES)))
    assert NAME not in generate_latest(registry).decode()
