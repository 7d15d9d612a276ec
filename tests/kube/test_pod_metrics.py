"""A Kubernetes run's CPU and memory from the resource metrics API: metrics-server, built from
its Go module and registered through the API server's aggregation layer (`metrics_cluster`),
scrapes KWOK's simulated kubelets, which report what the pod's annotations say it uses. The
backend reads it with the notebook's own token, whose Role grants pod metrics in its namespace
only; a cluster that does not serve the API gets a run that says so and records nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from controlplane.cluster import ControlPlane
from kube_support import pods_of, wait_for
from kubelab_testing import manifest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes import dcgm, pod_metrics
from kubelab.experiments import Experiments
from kubelab.system_metrics import read_lines

CPU = "kwok.kubelab.dev/usage-cpu"
MEMORY = "kwok.kubelab.dev/usage-memory"
METRICS_WAIT = 120.0  # metrics-server reports a pod after two of its 10 s scrapes; a loaded machine is slower


def start_run(
    project_node: Callable[..., str], admin: client.ApiClient, lab: Experiments, namespace: str, home: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A CPU run on a KWOK node of this test's own, Running: its record and its pod."""
    project_node("cpu")
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    wait_for(lambda: pods_of(admin, namespace, record["id"]), what="the pod")
    wait_for(lambda: lab.get(record["id"])["status"] == "Running", what="Running")
    return record, pods_of(admin, namespace, record["id"])[0]  # read once bound: it names its node


def uses(admin: client.ApiClient, namespace: str, pod: str, cpu: str, memory: str) -> None:
    """What the simulated kubelet reports the pod's container uses from now on."""
    client.CoreV1Api(admin).patch_namespaced_pod(
        pod, namespace, {"metadata": {"annotations": {CPU: cpu, MEMORY: memory}}}
    )


def test_a_running_runs_view_records_its_pods_cpu_and_memory_from_the_metrics_api(
    metrics_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(dcgm.PROMETHEUS_URL, raising=False)
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "1")
    record, pod = start_run(project_node, admin, lab, namespace, home)
    uses(admin, namespace, pod["metadata"]["name"], "1500m", "512Mi")

    def measured() -> dict[str, Any] | None:
        summary: dict[str, Any] = lab.system(record["id"])["summary"]
        return summary if summary.get("cpu_percent") is not None else None

    summary = wait_for(measured, timeout=METRICS_WAIT, what="CPU and memory from the metrics API")
    assert summary["cpu_percent"] == pytest.approx(150, abs=1)  # 1.5 cores, as percent of one
    assert summary["rss_peak_mib"] == 512.0
    assert "process" not in summary["missing"]
    assert summary["missing"]["gpu"].startswith("no Prometheus configured")  # no GPU samples invented
    lines = read_lines(lab.run(record["id"]).system_file)
    assert lines[0]["sources"] == {"process": pod_metrics.SOURCE}
    assert all(set(line) == {"time", "cpu_percent", "rss_mib"} for line in lines[1:])

    metrics_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    wait_for(lambda: lab.get(record["id"])["status"] == "Succeeded", what="Succeeded")
    final = wait_for(
        lambda: (r := lab.get(record["id"]))["system"] and r["system"].get("rss_peak_mib") and r,
        what="the record's sums",
    )
    assert final["system"]["rss_peak_mib"] == 512.0  # the samples kept when the file is rewritten at the end
    assert read_lines(lab.run(record["id"]).system_file)[0]["sources"] == {"process": pod_metrics.SOURCE}


def test_a_notebook_token_reads_pod_metrics_in_its_namespace_and_not_in_anothers(
    metrics_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    notebook_kubeconfig: Path,
) -> None:
    core = client.CoreV1Api(admin)
    other = f"kl-other-{uuid.uuid4().hex[:6]}"
    core.create_namespace(manifest({"metadata": {"name": other}}))
    try:
        _, pod = start_run(project_node, admin, lab, namespace, home)
        node = pod["spec"]["nodeName"]  # another user's pod, measured beside it
        container = {"name": "main", "image": "registry.example.org/other:1"}
        core.create_namespaced_pod(
            other,
            manifest({"metadata": {"name": "theirs"}, "spec": {"nodeName": node, "containers": [container]}}),
        )
        for space in (namespace, other):
            listed = f"/apis/metrics.k8s.io/v1beta1/namespaces/{space}/pods"
            wait_for(
                lambda path=listed: metrics_cluster.request("GET", path)["items"],  # type: ignore[misc]
                timeout=METRICS_WAIT,
                what=f"the pod metrics in {space}",
            )
        with config.new_client_from_config(str(notebook_kubeconfig)) as api:
            custom = client.CustomObjectsApi(api)
            own = cast(
                "dict[str, Any]",
                custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", namespace, "pods"),
            )
            assert [m["metadata"]["name"] for m in own["items"]] == [pod["metadata"]["name"]]
            attempts: list[Callable[[], object]] = [
                lambda: custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", other, "pods"),
                lambda: custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "pods"),
                lambda: custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes"),
            ]
            for attempt in attempts:
                with pytest.raises(ApiException) as refused:
                    attempt()
                assert refused.value.status == 403
    finally:
        core.delete_namespace(other)


def test_without_the_metrics_api_the_view_says_why_and_records_no_cpu_or_memory(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(dcgm.PROMETHEUS_URL, raising=False)
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "1")
    record, pod = start_run(project_node, admin, lab, namespace, home)
    uses(admin, namespace, pod["metadata"]["name"], "2", "1Gi")  # used, but nothing serves the API
    read = lab.system(record["id"])
    assert read["summary"]["missing"]["process"] == (
        "the cluster does not serve the metrics API (metrics.k8s.io/v1beta1): no CPU or memory samples"
    )
    assert read["summary"].get("cpu_percent") is None and read["summary"].get("rss_peak_mib") is None
    assert read["series"]["time"] == []
    (only,) = read_lines(lab.run(record["id"]).system_file)  # said once, and no sample line
    assert only["sources"] == {}


def test_pod_metrics_sum_every_container_of_every_pod_at_the_newest_moment() -> None:
    # PodMetrics as the metrics API lists them (its documented v1beta1 shape): two pods of a
    # run, the first with a sidecar; CPU in nanocores and millicores, memory in Ki and Mi
    items = [
        {
            "metadata": {"name": "train-0", "namespace": "kl"},
            "timestamp": "2026-11-26T19:35:15Z",
            "window": "10.002s",
            "containers": [
                {"name": "main", "usage": {"cpu": "1500000000n", "memory": "524288Ki"}},
                {"name": "sidecar", "usage": {"cpu": "250m", "memory": "64Mi"}},
            ],
        },
        {
            "metadata": {"name": "train-1", "namespace": "kl"},
            "timestamp": "2026-11-26T19:35:20Z",
            "window": "9.998s",
            "containers": [{"name": "main", "usage": {"cpu": "1", "memory": "1Gi"}}],
        },
    ]
    assert pod_metrics.reading(items) == {"time": 1795721720.0, "cpu_percent": 275.0, "rss_mib": 1600.0}
    assert pod_metrics.reading([]) is None  # no pod measured yet: no sample, never zeros
    assert pod_metrics.reading([{"timestamp": "2026-11-26T19:35:15Z", "containers": []}]) is None
