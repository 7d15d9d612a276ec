"""A Kubernetes run's CPU and memory from the resource metrics API: metrics-server, built from
its Go module and registered through the API server's aggregation layer (`metrics_cluster`),
scrapes KWOK's simulated kubelets, which report what the pod's annotations say it uses. The
backend reads it with the notebook's own token, whose Role grants pod metrics in its namespace
only. A server's sampler lists every running run's pods once an interval, whether or not a view
follows them (counted by a proxy in front of the API server); a CLI's view reads its run's pods.
A cluster that does not serve the API gets a run that says so, once, and records nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from controlplane.cluster import ControlPlane
from controlplane.faults import FaultProxy
from kube_support import wait_for, wait_running
from kubelab_testing import manifest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes import dcgm, pod_metrics
from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.experiments import Experiments
from kubelab.records import RunDirectory
from kubelab.system_metrics import read_lines

CPU = "kwok.kubelab.dev/usage-cpu"
MEMORY = "kwok.kubelab.dev/usage-memory"
METRICS_WAIT = 120.0  # metrics-server reports a pod after two of its 10 s scrapes; a loaded machine is slower


@pytest.fixture(autouse=True)
def every_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples every second, and no Prometheus: the GPUs say why once and record nothing."""
    monkeypatch.delenv(dcgm.PROMETHEUS_URL, raising=False)
    monkeypatch.setenv("KUBELAB_SYSTEM_METRICS_INTERVAL", "1")


def start_run(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    uses: tuple[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A CPU run on a KWOK node of this test's own, Running: its record and its pod, whose
    container the simulated kubelet reports using `uses` (CPU, memory) from then on."""
    project_node("cpu")
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    (pod,) = wait_running(admin, lab, namespace, record["id"])  # read once running: it names its node
    if uses is not None:
        annotations = {CPU: uses[0], MEMORY: uses[1]}
        client.CoreV1Api(admin).patch_namespaced_pod(
            pod["metadata"]["name"], namespace, {"metadata": {"annotations": annotations}}
        )
    return record, pod


def process_samples(run: RunDirectory) -> list[dict[str, Any]]:
    return [line for line in read_lines(run.system_file) if "cpu_percent" in line]


def metrics_lists(proxy: FaultProxy) -> list[str]:
    """The paths of the metrics API requests the proxy saw."""
    return [seen.path for seen in proxy.seen() if "/apis/metrics.k8s.io/" in seen.path]


def test_a_cli_view_of_a_running_run_records_its_pods_cpu_and_memory_from_the_metrics_api(
    metrics_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    make_backend: Callable[..., KubernetesBackend],
    namespace: str,
    home: Path,
) -> None:
    backend = make_backend(start=False)  # a process that watches nothing: its views read the pods
    lab = Experiments(home=home, backend=backend, user="alice")
    record, pod = start_run(project_node, admin, lab, namespace, home, ("1500m", "512Mi"))
    assert not backend.sampler.running

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


def test_a_server_samples_every_running_run_nobody_views_with_one_list_an_interval(
    metrics_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    proxied_lab: Experiments,
    proxy: FaultProxy,
    namespace: str,
    home: Path,
) -> None:
    lab, backend = proxied_lab, cast(KubernetesBackend, proxied_lab.backend)
    first, _ = start_run(project_node, admin, lab, namespace, home, ("1500m", "512Mi"))
    second, pod = start_run(project_node, admin, lab, namespace, home, ("250m", "128Mi"))
    runs = [lab.run(first["id"]), lab.run(second["id"])]

    def measured(run: RunDirectory, cpu: float, rss: float) -> bool:
        return any((s["cpu_percent"], s["rss_mib"]) == (cpu, rss) for s in process_samples(run))

    wait_for(lambda: measured(runs[0], 150.0, 512.0), timeout=METRICS_WAIT, what="the first run's samples")
    wait_for(lambda: measured(runs[1], 25.0, 128.0), timeout=METRICS_WAIT, what="the second run's samples")
    for run in runs:  # read from the file, as a view would, and never from a view's request
        lines = read_lines(run.system_file)
        assert lines[0] == {
            "sources": {"process": pod_metrics.SOURCE},
            "missing": {"gpu": dcgm.NO_PROMETHEUS},
        }
        assert all(set(line) == {"time", "cpu_percent", "rss_mib"} for line in lines[1:])

    proxy.forget()
    before = backend.sampler.rounds
    for _ in range(3):  # views read the file: they ask the API server nothing
        for run in runs:
            assert lab.system(run.id)["summary"].get("cpu_percent") is not None
    wait_for(lambda: backend.sampler.rounds >= before + 5, what="five rounds of sampling")
    rounds = backend.sampler.rounds - before
    lists = metrics_lists(proxy)
    assert set(lists) == {f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"}  # the namespace's
    assert 1 <= len(lists) <= rounds + 1  # one list a round for both runs (+1: a round in flight), not two

    metrics_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    wait_for(lambda: lab.get(second["id"])["status"] == "Succeeded", what="Succeeded")

    def newer(than: float) -> bool:
        return any(s["time"] > than for s in process_samples(runs[0]))

    newest = max(s["time"] for s in process_samples(runs[0]))
    wait_for(lambda: newer(newest), timeout=METRICS_WAIT, what="a sample of the running run")
    ended = process_samples(runs[1])  # a round that began before the run ended is over by now
    newest = max(s["time"] for s in process_samples(runs[0]))
    wait_for(lambda: newer(newest), timeout=METRICS_WAIT, what="another sample of the running run")
    assert process_samples(runs[1]) == ended  # the ended run got none

    backend.close()  # the server shuts down: the sampler's thread has ended when close returns
    assert not backend.sampler.running  # (close waits 1.5 s for it at most)


def test_without_the_metrics_api_each_run_says_why_once_and_the_sampler_backs_off(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    proxied_lab: Experiments,
    proxy: FaultProxy,
    namespace: str,
    home: Path,
) -> None:
    lab, backend = proxied_lab, cast(KubernetesBackend, proxied_lab.backend)
    record, _ = start_run(project_node, admin, lab, namespace, home, ("2", "1Gi"))  # nothing serves the API
    run = lab.run(record["id"])
    why = "the cluster does not serve the metrics API (metrics.k8s.io/v1beta1): no CPU or memory samples"
    wait_for(
        lambda: "process" in (read_lines(run.system_file) or [{}])[0].get("missing", {}), what="the note"
    )
    proxy.forget()
    before = backend.sampler.rounds
    wait_for(lambda: backend.sampler.rounds >= before + 10, what="ten rounds of sampling")
    asked = len(metrics_lists(proxy))
    assert 1 <= asked <= 3  # asked again after 1, 3, 7 rounds, not every round (10 here)
    (only,) = read_lines(run.system_file)  # said once, and no sample line
    assert only == {"sources": {}, "missing": {"process": why, "gpu": dcgm.NO_PROMETHEUS}}
    read = lab.system(record["id"])
    assert read["summary"]["missing"]["process"] == why
    assert read["summary"].get("cpu_percent") is None and read["summary"].get("rss_peak_mib") is None
    assert read["series"]["time"] == []


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


def test_an_account_the_metrics_api_refuses_says_so_once_per_run(
    metrics_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    proxied_lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    rbac = client.RbacAuthorizationV1Api(admin)
    for role in rbac.list_namespaced_role(namespace).items:  # the notebook's Role, without pod metrics
        kept = [r for r in role.rules or [] if "metrics.k8s.io" not in (r.api_groups or [])]
        if role.metadata and role.metadata.name and len(kept) < len(role.rules or []):
            rules = [admin.sanitize_for_serialization(rule) for rule in kept]
            rbac.patch_namespaced_role(role.metadata.name, namespace, {"rules": rules})
    records = [
        start_run(project_node, admin, proxied_lab, namespace, home, ("1", "1Gi"))[0] for _ in range(2)
    ]
    refused = f"the metrics API (metrics.k8s.io/v1beta1) refused to list pod metrics in {namespace}: "

    def said(run: RunDirectory) -> list[dict[str, Any]] | None:
        lines = read_lines(run.system_file)
        return lines if lines and "process" in lines[0]["missing"] else None

    for record in records:
        (only,) = wait_for(lambda id=record["id"]: said(proxied_lab.run(id)), what="the note")  # type: ignore[misc]
        why = only["missing"]["process"]
        assert why.startswith(refused) and why.endswith("needs get/list on pods.metrics.k8s.io")
        assert only["sources"] == {}  # no CPU or memory sample, never zeros
