"""Distributed layouts on the test API server: Indexed Jobs with a headless Service, parameter
servers, Kubeflow jobs (decided by discovery) and Kueue queues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube_support import notebook_env, pods_of, wait_for

from kubelab.errors import ValidationError
from kubelab.kube.backend import KubernetesBackend
from kubelab.lab import Lab

NODE = {"lab.example.org/project": "vision"}


def submit(lab: Lab, home: Path, **fields) -> str:
    spec = {"command": ["python", "train.py"], "resources": {"cpu": "1", "memory": "1Gi"},
            **fields}
    return lab.submit(spec, base_dir=home)["id"]


def env_of(pod: dict) -> dict[str, dict]:
    return {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}


@pytest.mark.parametrize("framework, replicas", [("pytorch", 4), ("paddle", 3)])
def test_replicas_get_stable_names_and_ranks(kube_api, lab: Lab, namespace: str, home: Path,
                                             framework: str, replicas: int) -> None:
    kube_api.add_node("n1", cpu="64", memory="256Gi", labels=NODE)
    run_id = submit(lab, home, framework=framework, replicas=replicas)
    services = [s for s in kube_api.objects("services", namespace)
                if s["metadata"]["labels"].get("kubelab.io/experiment") == run_id]
    assert len(services) == 1 and services[0]["spec"]["clusterIP"] == "None"
    pods = wait_for(lambda: len(p := pods_of(kube_api, namespace, run_id)) == replicas and p)
    (job,) = [j for j in kube_api.objects("jobs.batch", namespace)
              if j["metadata"]["labels"].get("kubelab.io/experiment") == run_id]
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
    for pod in pods:
        kube_api.run_pod(namespace, pod["metadata"]["name"])
    wait_for(lambda: lab.get(run_id)["status"] == "Running", what="Running")
    assert lab.get(run_id)["reason"] == f"{replicas}/{replicas} replicas running"
    for pod in pods:
        kube_api.succeed_pod(namespace, pod["metadata"]["name"])
    wait_for(lambda: lab.get(run_id)["status"] == "Succeeded", what="Succeeded")
    record = lab.get(run_id)
    assert [r["index"] for r in record["replica_status"]] == list(range(replicas))
    wait_for(lambda: not [s for s in kube_api.objects("services", namespace)
                          if s["metadata"]["name"] == service], what="Service cleanup")


def test_tensorflow_with_parameter_servers(kube_api, lab: Lab, namespace: str,
                                           home: Path) -> None:
    kube_api.add_node("n1", cpu="64", memory="256Gi", labels=NODE)
    run_id = submit(lab, home, framework="tensorflow", replicas=2, parameter_servers=1)
    pods = wait_for(lambda: len(p := pods_of(kube_api, namespace, run_id)) == 3 and p)
    roles = sorted(p["metadata"]["labels"]["kubelab.io/role"] for p in pods)
    assert roles == ["ps", "worker", "worker"]
    ps = next(p for p in pods if p["metadata"]["labels"]["kubelab.io/role"] == "ps")
    config = json.loads(env_of(ps)["TF_CONFIG"]["value"].replace("$(KUBELAB_PS_INDEX)", "0"))
    assert config["task"] == {"type": "ps", "index": 0} and len(config["cluster"]["worker"]) == 2
    for pod in pods:
        kube_api.run_pod(namespace, pod["metadata"]["name"])
    wait_for(lambda: lab.get(run_id)["status"] == "Running")
    for pod in pods:
        if pod is not ps:
            kube_api.succeed_pod(namespace, pod["metadata"]["name"])
    wait_for(lambda: lab.get(run_id)["status"] == "Succeeded", what="workers decide")
    # parameter servers never finish on their own: kubelab removes them when the workers end
    wait_for(lambda: not [j for j in kube_api.objects("jobs.batch", namespace)
                          if j["metadata"]["name"].endswith("-ps")], what="ps Job removed")


def test_kubeflow_engine_when_the_operator_is_served(kube_api, lab: Lab, namespace: str,
                                                     home: Path, admin) -> None:
    from kubernetes import client

    run_id = submit(lab, home, framework="pytorch", replicas=3, engine="kubeflow")
    (job,) = kube_api.objects("pytorchjobs.kubeflow.org", namespace)
    assert job["metadata"]["labels"]["kubelab.io/experiment"] == run_id
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    custom = client.CustomObjectsApi(admin)
    name = job["metadata"]["name"]
    job = custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs",
                                              name)
    job["status"] = {"conditions": [{"type": "Running", "status": "True",
                                     "reason": "PyTorchJobRunning", "message": "running"}]}
    custom.replace_namespaced_custom_object_status("kubeflow.org", "v1", namespace,
                                                   "pytorchjobs", name, job)
    wait_for(lambda: lab.get(run_id)["status"] == "Running", what="Running from conditions")
    job = custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs",
                                              name)
    job["status"]["conditions"].append({"type": "Succeeded", "status": "True",
                                        "reason": "PyTorchJobSucceeded", "message": "done"})
    custom.replace_namespaced_custom_object_status("kubeflow.org", "v1", namespace,
                                                   "pytorchjobs", name, job)
    wait_for(lambda: lab.get(run_id)["status"] == "Succeeded")
    lab.delete(run_id)
    assert not kube_api.objects("pytorchjobs.kubeflow.org", namespace)


def test_kubeflow_engine_without_the_operator_is_refused(kube_api_plain, tmp_path: Path,
                                                         home: Path) -> None:
    from kubernetes import client, config

    admin = config.new_client_from_config(str(kube_api_plain.write_kubeconfig(tmp_path / "a")))
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": "bob"}})
    backend = KubernetesBackend.from_kubeconfig(
        kube_api_plain.write_kubeconfig(tmp_path / "k"), notebook_env("bob", home))
    lab = Lab(home=home, backend=backend, user="alice")
    with pytest.raises(ValidationError) as err:
        submit(lab, home, framework="pytorch", replicas=2, engine="kubeflow")
    assert err.value.fields[0].path == "engine"
    assert "does not serve" in err.value.fields[0].reason
    assert not list((home / "runs").iterdir())
    submit(lab, home, framework="pytorch", replicas=2)  # engine: job still works
    assert len(kube_api_plain.objects("jobs.batch", "bob")) == 1


def test_queue_waits_for_quota(kube_api, lab: Lab, namespace: str, home: Path, admin) -> None:
    from kubernetes import client

    run_id = submit(lab, home, queue="team-a", resources={"cpu": "1", "gpus": 1})
    record = lab.get(run_id)
    assert record["status"] == "Queued"
    assert record["reason"] == "waiting for quota in queue 'team-a'"
    (job,) = kube_api.objects("jobs.batch", namespace)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert not pods_of(kube_api, namespace, run_id)
    # Kueue admits the workload by unsuspending the Job
    client.BatchV1Api(admin).patch_namespaced_job(job["metadata"]["name"], namespace,
                                                  {"spec": {"suspend": False}})
    wait_for(lambda: lab.get(run_id)["status"] == "Pending", what="admitted")
    assert pods_of(kube_api, namespace, run_id)
