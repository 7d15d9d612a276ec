"""A Kubernetes run's GPU samples from the DCGM exporter's series through Prometheus: recorded
`query_range` answers served by a real HTTP stand-in, written as the run's `system.jsonl` in the
runner's format when a run on the real control plane ends (its record then carries the sums);
and what the run says where Prometheus is missing, down or empty."""

from __future__ import annotations

import copy
import json
import math
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from kube_support import wait_for, wait_running
from kubernetes import client

from kubelab.backends.kubernetes import dcgm
from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.experiments import Experiments
from kubelab.records import RUNNING, RunDirectory, Status, parse_iso
from kubelab.system_digest import summarize_file
from kubelab.system_metrics import read_lines

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "prometheus_dcgm_range.json").read_text()
)
START, END = 1764140000.0, 1764140010.0


class Prometheus(BaseHTTPRequestHandler):
    asked: list[dict[str, str]] = []
    answers: dict[str, Any] = RECORDED

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        type(self).asked.append({"path": url.path, **query})
        series = query.get("query", "").split("{", 1)[0]
        body = json.dumps(self.answers.get(series, {"status": "success", "data": {"result": []}})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    Prometheus.asked, Prometheus.answers = [], RECORDED
    server = ThreadingHTTPServer(("127.0.0.1", 0), Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_runs_pods_gpus_become_samples_in_the_runners_format(tmp_path: Path, prometheus: str) -> None:
    path = tmp_path / "system.jsonl"
    dcgm.record(path, dcgm.PrometheusHttp(prometheus), "jhub-alice", "train-ab12cd", START, END, 5.0)
    asked = {a["query"].split("{", 1)[0]: a for a in Prometheus.asked}
    assert set(asked) == set(dcgm.SERIES.values())
    util = asked["DCGM_FI_DEV_GPU_UTIL"]
    assert util["path"] == "/api/v1/query_range" and util["step"] == "5"
    assert (util["start"], util["end"]) == ("1764140000.000", "1764140010.000")
    assert 'exported_namespace="jhub-alice",exported_pod=~"train\\\\-ab12cd-.+"' in util["query"]
    assert 'namespace="jhub-alice",pod=~"train\\\\-ab12cd-.+"' in util["query"]
    lines = read_lines(path)
    assert lines[0] == {"sources": {"gpu": "dcgm"}, "missing": {"process": dcgm.NO_PROCESS}}
    assert lines[2] == {
        "time": 1764140005.0,
        "gpus": [
            {"index": 0, "util": 93.0, "memory_mib": 40960.0, "power_w": 385.25},
            {"index": 1, "util": 88.0, "memory_mib": 40960.0},  # no power that moment: left out
        ],
    }
    summary = summarize_file(path)
    assert summary.samples == 3 and summary.gpu_memory_peak_mib == 41984.0
    assert summary.gpu_hours == pytest.approx(2 * 10 / 3600)
    assert summary.gpu_util == pytest.approx((0 + 93 + 97 + 0 + 88 + 90) / 6)


def test_a_long_run_asks_for_at_most_ten_thousand_points_a_series(tmp_path: Path, prometheus: str) -> None:
    week = 7 * 86400
    dcgm.record(tmp_path / "system.jsonl", dcgm.PrometheusHttp(prometheus), "ns", "job", 0.0, week, 5.0)
    assert {float(a["step"]) for a in Prometheus.asked} == {week / dcgm.MAX_POINTS}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_no_prometheus_a_silent_one_or_no_series_each_say_why_and_record_nothing(
    tmp_path: Path, prometheus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(dcgm.PROMETHEUS_URL, raising=False)
    path = tmp_path / "system.jsonl"
    dcgm.record(path, dcgm.from_environ(), "ns", "job", START, END, 5.0)
    assert read_lines(path) == [
        {
            "sources": {},
            "missing": {
                "process": dcgm.NO_PROCESS,
                "gpu": "no Prometheus configured (KUBELAB_PROMETHEUS_URL): no GPU metrics on Kubernetes",
            },
        }
    ]
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(dcgm.PROMETHEUS_URL, down)
    dcgm.record(path, dcgm.from_environ(), "ns", "job", START, END, 5.0)
    (only,) = read_lines(path)
    assert only["missing"]["gpu"].startswith(f"Prometheus at {down} did not answer: ")
    Prometheus.answers = {
        "DCGM_FI_DEV_GPU_UTIL": {"status": "error", "errorType": "bad_data", "error": "parse error"}
    }
    dcgm.record(path, dcgm.PrometheusHttp(prometheus), "ns", "job", START, END, 5.0)
    (only,) = read_lines(path)
    assert only["missing"]["gpu"].endswith("did not answer: bad_data: parse error")
    Prometheus.answers = {}
    dcgm.record(path, dcgm.PrometheusHttp(prometheus), "ns", "job", START, END, 5.0)
    (only,) = read_lines(path)
    assert only["missing"]["gpu"].endswith("has no DCGM series for this run's pods")
    assert summarize_file(path).gpu_util is None  # nothing measured, never 0


def start_gpu_run(
    project_node: Callable[..., str], admin: client.ApiClient, lab: Experiments, namespace: str, home: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A one-GPU run on a KWOK A100 node, Running: its record and its pod."""
    project_node("gpu", gpus=4, gpu_type="A100")
    record = lab.submit({"command": ["python", "train.py"], "resources": {"gpus": 1}}, base_dir=home)
    (pod,) = wait_running(admin, lab, namespace, record["id"])
    return record, pod


def test_a_run_that_ends_on_the_cluster_gets_its_pods_gpu_samples(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    prometheus: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(dcgm.PROMETHEUS_URL, prometheus)
    monkeypatch.delenv("KUBELAB_SYSTEM_METRICS_INTERVAL", raising=False)
    record, pod = start_gpu_run(project_node, admin, lab, namespace, home)
    simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    final = wait_for(
        lambda: (r := lab.get(record["id"]))["system"]["gpu_util"] is not None and r, what="the DCGM samples"
    )
    assert final["status"] == "Succeeded"
    assert final["system"]["gpu_memory_peak_mib"] == 41984.0  # the recorded answers, as its sums
    job = pod["metadata"]["labels"]["job-name"]
    (util,) = [a for a in Prometheus.asked if a["query"].startswith("DCGM_FI_DEV_GPU_UTIL")]
    pods = job.replace("-", "\\\\-") + "-.+"  # the job's pods, as a regular expression in PromQL
    assert f'exported_namespace="{namespace}",exported_pod=~"{pods}"' in util["query"]
    assert float(util["end"]) >= float(util["start"]) and util["step"] == "5"


def shifted(to: float) -> dict[str, Any]:
    """The recorded answers with their three moments moved to `to`, `to + 5` and `to + 10`."""
    answers = copy.deepcopy(RECORDED)
    for answer in answers.values():
        if isinstance(answer, dict):
            for series in answer["data"]["result"]:
                series["values"] = [[moment - START + to, value] for moment, value in series["values"]]
    return answers


def test_a_running_runs_view_reads_the_samples_since_the_last_once_an_interval(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    backend: KubernetesBackend,
    lab: Experiments,
    namespace: str,
    home: Path,
    prometheus: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(dcgm.PROMETHEUS_URL, down)
    monkeypatch.delenv("KUBELAB_SYSTEM_METRICS_INTERVAL", raising=False)  # every 5 s
    now = [1000.0]
    backend.sampler.live.clock = lambda: now[0]  # the poller's monotonic clock, moved by hand
    record, pod = start_gpu_run(project_node, admin, lab, namespace, home)
    running = lab.get(record["id"])
    started = parse_iso(running["started_at"])
    first = float(math.ceil(started))  # the exporter's first sample of the run (whole seconds)

    read = lab.system(record["id"])  # Prometheus down: the view says why, and nothing is recorded
    assert read["summary"]["missing"]["gpu"].startswith(f"Prometheus at {down} did not answer: ")
    assert read["series"]["time"] == [] and "gpu_util" not in read["summary"]

    monkeypatch.setenv(dcgm.PROMETHEUS_URL, prometheus)
    Prometheus.answers = shifted(first)
    assert lab.system(record["id"])["summary"]["samples"] == 0  # asked 0 s ago: not again yet
    assert Prometheus.asked == []
    now[0] += 5
    read = lab.system(record["id"])
    assert read["summary"]["samples"] == 3 and "gpu" not in read["summary"]["missing"]
    assert read["series"]["time"] == [first, first + 5, first + 10]
    assert {float(a["start"]) for a in Prometheus.asked} == {round(started, 3)}
    assert lab.get(record["id"])["status"] == "Running"

    Prometheus.asked, Prometheus.answers = [], shifted(first + 10)  # overlaps by one moment
    now[0] += 5
    read = lab.system(record["id"])
    assert read["series"]["time"] == [first + 5 * i for i in range(5)]  # the newer ones appended
    assert {float(a["start"]) for a in Prometheus.asked} == {first + 10}
    assert read["series"]["gpus"][1]["util"][-1] == 90.0  # the same pods keep their GPU numbers
    assert lab.get(record["id"])["system"]["gpu_memory_peak_mib"] == 41984.0  # the record's sums too

    Prometheus.asked = []
    simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    wait_for(lambda: lab.get(record["id"])["status"] == "Succeeded", what="Succeeded")
    now[0] += 5
    wait_for(lambda: lab.system(record["id"])["summary"]["samples"] == 3, what="the file written whole")
    assert len(Prometheus.asked) == 3  # once at its end, from its start; its views ask no more
    assert {float(a["start"]) for a in Prometheus.asked} == {round(started, 3)}


def test_the_sampler_hands_each_run_a_reading_at_its_own_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds come every 5 s: a run asking for 10 s takes every other reading, one asking for 0
    none, one with no interval of its own every one (the lab's)."""
    monkeypatch.delenv(dcgm.PROMETHEUS_URL, raising=False)
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "5")
    now = [0.0]
    live = dcgm.LiveSamples(clock=lambda: now[0])
    runs = {
        every: RunDirectory.create(
            tmp_path / "runs",
            {"command": "true", **({} if every is None else {"system_metrics_interval": every})},
            Status().move(RUNNING, "running"),
        )
        for every in (None, 10, 0)
    }
    assert [live.interval(run) for run in runs.values()] == [5.0, 10.0, None]
    for round_ in range(6):
        for run in runs.values():
            live.take(run, ({"time": 1764140000.0 + 5 * round_, "cpu_percent": 50.0, "rss_mib": 10.0}, None))
        now[0] += 5.0
    counted = {
        every: len(read_lines(run.system_file)[1:]) if run.system_file.exists() else 0
        for every, run in runs.items()
    }
    assert counted == {None: 6, 10: 3, 0: 0}
