"""Distributed layouts on the real control plane: Indexed Jobs with a headless Service,
parameter servers, Kubeflow jobs (decided by discovery) and Kueue-style suspended Jobs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from controlplane.cluster import ControlPlane
from controlplane.crds import TRAINING_OPERATOR, training_operator_crd
from kube_support import objects, pods_of, wait_for, wait_running
from kubelab_testing import wait_until
from kubernetes import client

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments


def submit(lab: Experiments, home: Path, **fields: Any) -> str:
    spec = {"command": ["python", "train.py"], "resources": {"cpu": "1", "memory": "1Gi"}, **fields}
    return str(lab.submit(spec, base_dir=home)["id"])


def env_of(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}


def experiment_objects(
    admin: client.ApiClient, kind: str, namespace: str, run_id: str
) -> list[dict[str, Any]]:
    return objects(admin, kind, namespace, f"kubelab.io/experiment={run_id}")


@pytest.fixture
def training_operator(simulated_cluster: ControlPlane) -> Iterator[None]:
    """The Training Operator's API (its CRDs) is served; the test plays the operator."""
    for kind in TRAINING_OPERATOR:
        simulated_cluster.install_crd(training_operator_crd(kind))
    yield
    for kind in TRAINING_OPERATOR:
        simulated_cluster.remove_crd(f"{kind.lower()}s.kubeflow.org")


@pytest.mark.parametrize("framework, replicas", [("pytorch", 4), ("paddle", 3)])
def test_replicas_get_stable_names_and_ranks(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    framework: str,
    replicas: int,
) -> None:
    project_node(cpu="64", memory="256Gi")
    run_id = submit(lab, home, framework=framework, replicas=replicas)
    services = experiment_objects(admin, "services", namespace, run_id)
    assert len(services) == 1 and services[0]["spec"]["clusterIP"] == "None"
    pods = wait_running(admin, lab, namespace, run_id, count=replicas)
    (job,) = experiment_objects(admin, "jobs", namespace, run_id)
    job_name, service = job["metadata"]["name"], services[0]["metadata"]["name"]
    for index, pod in enumerate(pods):
        assert pod["spec"]["hostname"] == f"{job_name}-{index}"
        assert pod["spec"]["subdomain"] == service
        assert "valueFrom" in env_of(pod)["RANK"]
    if framework == "pytorch":
        assert env_of(pods[0])["MASTER_ADDR"]["value"] == f"{job_name}-0.{service}"
    else:
        endpoints = env_of(pods[0])["PADDLE_TRAINER_ENDPOINTS"]["value"].split(",")
        assert endpoints[2].startswith(f"{job_name}-2.{service}:")
    assert lab.get(run_id)["reason"] == f"{replicas}/{replicas} replicas running"
    for pod in pods:
        simulated_cluster.end_pod(namespace, pod["metadata"]["name"])
    wait_for(lambda: lab.get(run_id)["status"] == "Succeeded", what="Succeeded")
    record = lab.get(run_id)
    assert [r["index"] for r in record["replica_status"]] == list(range(replicas))
    wait_for(lambda: not experiment_objects(admin, "services", namespace, run_id), what="Service cleanup")


def test_pytorch_on_a100_nodes(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    make_backend: Callable[..., KubernetesBackend],
    namespace: str,
    home: Path,
) -> None:
    """The lab's own fleet: 4 replicas with a GPU each land on the simulated A100 nodes."""
    lab = Experiments(home=home, backend=make_backend(node_selector={}), user="alice")
    run_id = submit(
        lab,
        home,
        framework="pytorch",
        replicas=4,
        resources={"cpu": "2", "memory": "8Gi", "gpus": 1, "gpu_type": "A100"},
    )
    pods = wait_running(admin, lab, namespace, run_id, count=4)  # running, so placed
    assert {p["spec"]["nodeName"] for p in pods} <= {"a100-0", "a100-1"}
    for pod in pods:
        simulated_cluster.end_pod(namespace, pod["metadata"]["name"])
    assert (
        wait_for(lambda: (r := lab.get(run_id))["status"] == "Succeeded" and r, what="Succeeded")["exit_code"]
        == 0
    )


def test_more_gpus_than_any_node_shows_the_scheduler_reason(
    admin: client.ApiClient, make_backend: Callable[..., KubernetesBackend], namespace: str, home: Path
) -> None:
    lab = Experiments(home=home, backend=make_backend(node_selector={}), user="alice")
    run_id = submit(lab, home, resources={"cpu": "1", "memory": "1Gi", "gpus": 16, "gpu_type": "A100"})
    record = wait_for(
        lambda: "Insufficient nvidia.com/gpu" in (r := lab.get(run_id))["reason"] and r,
        what="the scheduler's reason",
    )
    assert record["status"] == "Pending"
    assert record["reason"].startswith("0/"), record["reason"]


def test_tensorflow_with_parameter_servers(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node(cpu="64", memory="256Gi")
    run_id = submit(lab, home, framework="tensorflow", replicas=2, parameter_servers=1)
    pods = wait_running(admin, lab, namespace, run_id, count=3)
    roles = sorted(p["metadata"]["labels"]["kubelab.io/role"] for p in pods)
    assert roles == ["ps", "worker", "worker"]
    ps = next(p for p in pods if p["metadata"]["labels"]["kubelab.io/role"] == "ps")
    config = json.loads(env_of(ps)["TF_CONFIG"]["value"].replace("$(KUBELAB_PS_INDEX)", "0"))
    assert config["task"] == {"type": "ps", "index": 0} and len(config["cluster"]["worker"]) == 2
    for pod in pods:
        if pod is not ps:
            simulated_cluster.end_pod(namespace, pod["metadata"]["name"])
    wait_for(lambda: lab.get(run_id)["status"] == "Succeeded", what="workers decide")
    # parameter servers never finish on their own: kubelab removes them when the workers end
    wait_for(
        lambda: (
            not [
                j
                for j in experiment_objects(admin, "jobs", namespace, run_id)
                if j["metadata"]["name"].endswith("-ps")
            ]
        ),
        what="ps Job removed",
    )


def test_kubeflow_engine_when_the_operator_is_served(
    training_operator: None, lab: Experiments, namespace: str, home: Path, admin: client.ApiClient
) -> None:
    run_id = submit(lab, home, framework="pytorch", replicas=3, engine="kubeflow")
    custom = client.CustomObjectsApi(admin)
    (job,) = cast(
        dict[str, Any], custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")
    )["items"]
    assert job["metadata"]["labels"]["kubelab.io/experiment"] == run_id
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    name = job["metadata"]["name"]
    job["status"] = {
        "conditions": [
            {"type": "Running", "status": "True", "reason": "PyTorchJobRunning", "message": "running"}
        ]
    }
    custom.replace_namespaced_custom_object_status("kubeflow.org", "v1", namespace, "pytorchjobs", name, job)
    wait_until(lab, run_id, "Running")  # from the job's conditions
    job = cast(
        dict[str, Any],
        custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", name),
    )
    job["status"]["conditions"].append(
        {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "message": "done"}
    )
    custom.replace_namespaced_custom_object_status("kubeflow.org", "v1", namespace, "pytorchjobs", name, job)
    wait_for(lambda: lab.get(run_id)["status"] == "Succeeded")
    lab.delete(run_id)
    wait_for(
        lambda: (
            not cast(
                dict[str, Any],
                custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs"),
            )["items"]
        ),
        what="PyTorchJob deleted",
    )


def test_an_elastic_run_is_a_pytorchjob_the_api_server_keeps_with_its_elastic_policy(
    training_operator: None, lab: Experiments, namespace: str, home: Path, admin: client.ApiClient
) -> None:
    run_id = submit(lab, home, framework="pytorch", replicas="1:3", engine="kubeflow")
    custom = client.CustomObjectsApi(admin)
    (job,) = cast(
        dict[str, Any], custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")
    )["items"]
    assert job["metadata"]["labels"]["kubelab.io/experiment"] == run_id
    policy = job["spec"]["elasticPolicy"]
    assert (policy["rdzvBackend"], policy["minReplicas"], policy["maxReplicas"]) == ("c10d", 1, 3)
    assert {k: v["replicas"] for k, v in job["spec"]["pytorchReplicaSpecs"].items()} == {"Worker": 3}
    assert lab.get(run_id)["replicas"] == 3


def test_kubeflow_engine_without_the_operator_is_refused(
    lab: Experiments, admin: client.ApiClient, namespace: str, home: Path
) -> None:
    with pytest.raises(ValidationError) as err:
        submit(lab, home, framework="pytorch", replicas=2, engine="kubeflow")
    assert err.value.fields[0].path == "engine"
    assert "does not serve" in err.value.fields[0].reason
    assert not list((home / "runs").iterdir())
    submit(lab, home, framework="pytorch", replicas=2)  # engine: job still works
    assert len(objects(admin, "jobs", namespace)) == 1


def test_queue_waits_for_quota(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    lab: Experiments,
    namespace: str,
    home: Path,
    admin: client.ApiClient,
) -> None:
    project_node(gpus=2)
    run_id = submit(lab, home, queue="team-a", resources={"cpu": "1", "gpus": 1})
    record = lab.get(run_id)
    assert record["status"] == "Queued"
    assert record["reason"] == "waiting for quota in queue 'team-a'"
    (job,) = objects(admin, "jobs", namespace)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert not pods_of(admin, namespace, run_id)
    # Kueue admits the workload by unsuspending the Job
    client.BatchV1Api(admin).patch_namespaced_job(
        job["metadata"]["name"], namespace, {"spec": {"suspend": False}}
    )
    wait_for(lambda: lab.get(run_id)["status"] in ("Pending", "Running"), what="admitted")
    assert wait_for(lambda: pods_of(admin, namespace, run_id), what="pods after admission")
