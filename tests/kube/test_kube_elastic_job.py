"""An elastic run without the Training Operator on the real control plane: an Indexed Job that
kubelab shrinks for a high-priority run and grows back when it ends.

The backend runs with the notebook's token (its Role is all it has), so it sizes runs by the
namespace's GPU quota; the pods sit on a KWOK node advertising `nvidia.com/gpu`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kube_support import ONE_GPU_RUN, objects, pods_of, start_high, wait_for, wait_running
from kubelab_testing import manifest, wait_until
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments

ELASTIC = {**ONE_GPU_RUN, "framework": "pytorch", "replicas": "1:2", "priority": "low", "name": "elastic"}


def gpu_quota(admin: client.ApiClient, namespace: str, gpus: int) -> None:
    body = {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}}
    client.CoreV1Api(admin).create_namespaced_resource_quota(namespace, manifest(body))
    wait_for(
        lambda: [q for q in objects_quota(admin, namespace) if (q.get("status") or {}).get("hard")],
        what="the quota's status",
    )


def objects_quota(admin: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    found: Any = client.CoreV1Api(admin).list_namespaced_resource_quota(namespace)
    return [admin.sanitize_for_serialization(q) for q in found.items]


def job_of(admin: client.ApiClient, namespace: str, run_id: str) -> dict[str, Any]:
    (job,) = objects(admin, "jobs", namespace, f"kubelab.io/experiment={run_id}")
    return job


def size_of(admin: client.ApiClient, namespace: str, run_id: str) -> tuple[int, int]:
    spec = job_of(admin, namespace, run_id)["spec"]
    return spec["parallelism"], spec["completions"]


def test_an_elastic_job_shrinks_for_a_high_run_and_grows_back(
    simulated_cluster: Any,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    prioritised: Experiments,
    namespace: str,
    home: Path,
) -> None:
    lab = prioritised
    project_node("gpu", gpus=2)
    gpu_quota(admin, namespace, 2)
    elastic = lab.submit(ELASTIC, base_dir=home)["id"]
    job = job_of(admin, namespace, elastic)
    assert job["spec"]["completionMode"] == "Indexed" and size_of(admin, namespace, elastic) == (2, 2)
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PET_NNODES"] == "1:2" and env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_RDZV_ENDPOINT"] == f"{job['metadata']['name']}-0.{job['metadata']['name']}:23456"
    wait_running(admin, lab, namespace, elastic, count=2, timeout=90, reason="running 2 of 2 replicas")

    high, high_pod = start_high(admin, lab, namespace, home)
    wait_for(lambda: size_of(admin, namespace, elastic) == (1, 1), timeout=60, what="the Job shrunk")
    left = wait_for(
        lambda: (found := pods_of(admin, namespace, elastic)) and len(found) == 1 and found,
        timeout=60,
        what="one elastic pod",
    )
    assert left[0]["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"
    record = wait_until(lab, elastic, "Running", reason="shrunk to 1 of 2 replicas for", timeout=60)
    assert "priority high" in record["reason"] and high in record["reason"], record["reason"]

    simulated_cluster.end_pod(namespace, high_pod, "Succeeded")
    wait_until(lab, high, "Succeeded", timeout=60)
    wait_for(lambda: size_of(admin, namespace, elastic) == (2, 2), timeout=60, what="the Job grown back")
    wait_for(lambda: len(pods_of(admin, namespace, elastic)) == 2, timeout=60, what="two elastic pods again")
    record = wait_until(lab, elastic, "Running", reason="grew to 2 of 2 replicas", timeout=60)
    sizes = [span["replicas"] for span in record["timeline"] if span["state"] == "Running"]
    changes = [size for at, size in enumerate(sizes) if at == 0 or sizes[at - 1] != size]
    spans = [(s["replicas"], s["reason"]) for s in record["timeline"]]
    assert changes == [2, 1, 2], spans  # (a watch's late, older view may repeat a span: not a size)
    assert job_of(admin, namespace, elastic)["status"].get("failed", 0) == 0  # removed, not failed


def test_an_elastic_job_starts_at_the_size_the_quota_allows(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    prioritised: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node("gpu", gpus=4)
    gpu_quota(admin, namespace, 2)
    first = prioritised.submit({**ONE_GPU_RUN, "name": "fixed"}, base_dir=home)["id"]
    wait_until(prioritised, first, "Running", timeout=90)
    elastic = prioritised.submit({**ELASTIC, "replicas": "1:3"}, base_dir=home)["id"]
    assert size_of(admin, namespace, elastic) == (1, 1)
    wait_until(prioritised, elastic, "Running", reason="running 1 of 3 replicas", timeout=90)


def test_with_nodes_in_reach_an_elastic_job_starts_at_what_the_groups_nodes_have_free(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    kubeconfig: Path,
    make_backend: Callable[..., KubernetesBackend],
    namespace: str,
    home: Path,
) -> None:
    """An account that may list nodes and pods (here the admin's) sizes by free GPUs per node:
    two nodes of the group with one GPU taken on one, no quota; a two-GPU replica fits once."""
    lab = Experiments(home=home, backend=make_backend(kubeconfig=kubeconfig), user="alice")
    project_node("gpu", gpus=2)
    project_node("gpu", gpus=1)
    first = lab.submit({**ONE_GPU_RUN, "name": "fixed"}, base_dir=home)["id"]
    wait_until(lab, first, "Running", timeout=90)
    two = {**ONE_GPU_RUN, "resources": {"cpu": "1", "memory": "1Gi", "gpus": 2}}
    elastic = lab.submit({**ELASTIC, **two, "priority": "normal", "replicas": "1:3"}, base_dir=home)["id"]
    assert size_of(admin, namespace, elastic) == (1, 1)


@pytest.mark.parametrize(
    ("fields", "path"),
    [({"replicas": "3:2"}, "replicas.min"), ({"framework": "tensorflow"}, "framework")],
)
def test_a_bad_elastic_spec_is_refused_by_field_on_kubernetes(
    lab: Experiments, home: Path, fields: dict[str, Any], path: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit({**ELASTIC, "priority": "normal", **fields}, base_dir=home)
    assert path in [f.path for f in caught.value.fields]
    assert lab.list()[0] == []  # nothing was created


def test_the_notebooks_right_to_patch_jobs_cannot_pass_the_quota_nor_change_the_pods(
    priority_classes_applied: None,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    make_backend: Callable[..., KubernetesBackend],
    namespace: str,
    home: Path,
) -> None:
    """The Role's `patch` on Jobs (for resizing) with the notebook's own token: a Job patched
    past the GPU quota gets no more pods, and its pods' template (priority, placement, image)
    cannot change, so nothing a patch does escapes what the API server already holds."""
    backend = make_backend(priority_classes=True, start=False)  # nobody resizes behind the test
    lab = Experiments(home=home, backend=backend, user="alice")
    project_node("gpu", gpus=4)
    gpu_quota(admin, namespace, 2)
    elastic = lab.submit({**ELASTIC, "replicas": "1:2"}, base_dir=home)["id"]
    name = job_of(admin, namespace, elastic)["metadata"]["name"]
    wait_for(lambda: len(pods_of(admin, namespace, elastic)) == 2, timeout=60, what="two pods")

    backend.api.merge("Job", name, {"spec": {"parallelism": 4, "completions": 4}})
    wait_for(
        lambda: [
            e
            for e in objects_events(admin, namespace)
            if e.get("reason") == "FailedCreate" and "exceeded quota" in (e.get("message") or "")
        ],
        timeout=60,
        what="the quota refusing the third pod",
    )
    assert len(pods_of(admin, namespace, elastic)) == 2
    for change in (
        {"priorityClassName": "kubelab-high"},
        {"nodeSelector": {"elsewhere": "yes"}},
        {"containers": [{"name": "trainer", "image": "evil.example.org/x:1"}]},
    ):
        with pytest.raises(ApiException) as refused:
            backend.api.merge("Job", name, {"spec": {"template": {"spec": change}}})
        assert refused.value.status == 422 and "immutable" in str(refused.value.body), change


def objects_events(admin: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    found: Any = client.CoreV1Api(admin).list_namespaced_event(namespace)
    return [admin.sanitize_for_serialization(e) for e in found.items]
