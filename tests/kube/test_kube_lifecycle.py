"""Experiments through `Experiments(backend=KubernetesBackend(...))`: submit, states, stop, logs, on the
real control plane (the Job controller makes the pods, the scheduler places them, KWOK runs
them until the test says how they end)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from controlplane.cluster import ControlPlane
from kube_support import objects, pods_of, wait_for, wait_running
from kubelab_testing import wait_until
from kubernetes import client

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.experiments import Experiments


def test_single_experiment_end_to_end(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node("gpu", gpus=4, gpu_type="A100")
    record = lab.submit(
        {"command": ["python", "train.py"], "resources": {"cpu": "1", "memory": "1Gi", "gpus": 1}},
        base_dir=home,
    )
    run_id = record["id"]
    assert record["status"] == "Pending"
    (pod,) = wait_running(admin, lab, namespace, run_id)
    name = pod["metadata"]["name"]
    simulated_cluster.append_log(namespace, name, "epoch 1 loss 0.5")
    simulated_cluster.end_pod(namespace, name, "Succeeded")
    final = wait_for(lambda: (r := lab.get(run_id))["status"] == "Succeeded" and r, what="Succeeded")
    assert final["exit_code"] == 0
    assert [t["state"] for t in final["history"]][-2:] == ["Running", "Succeeded"]
    assert "epoch 1 loss 0.5" in "".join(lab.logs(run_id))


def test_stop_deletes_job_pods_and_service(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    record = lab.submit(
        {"command": ["python", "train.py"], "framework": "pytorch", "replicas": 2}, base_dir=home
    )
    pods = wait_running(admin, lab, namespace, record["id"], count=2)
    simulated_cluster.append_log(namespace, pods[0]["metadata"]["name"], "step 7")
    stopped = lab.stop(record["id"])
    assert stopped["status"] == "Stopped" and stopped["reason"] == "stopped by user"
    wait_for(lambda: not objects(admin, "jobs", namespace), what="Job deleted")
    assert not [s for s in objects(admin, "services", namespace) if s["metadata"]["name"] != "kubernetes"]
    wait_for(lambda: not pods_of(admin, namespace, record["id"]), what="pods deleted")
    assert "step 7" in "".join(lab.logs(record["id"]))  # kept in the run directory
    assert lab.get(record["id"])["status"] == "Stopped"


def test_pruned_stop(lab: Experiments, home: Path) -> None:
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    assert lab.stop(record["id"], pruned=True)["status"] == "Pruned"


def test_restart_recovery_rebuilds_state(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    make_backend: Callable[..., KubernetesBackend],
    namespace: str,
    home: Path,
) -> None:
    project_node()
    first = Experiments(home=home, backend=make_backend(), user="alice")
    running = first.submit({"command": ["python", "a.py"]}, base_dir=home)["id"]
    finished = first.submit({"command": ["python", "b.py"]}, base_dir=home)["id"]
    deleted = first.submit({"command": ["python", "c.py"]}, base_dir=home)["id"]

    for run_id in (running, finished):
        wait_until(first, run_id, "Running")
    first.backend.close()  # the server goes away; the cluster carries on
    simulated_cluster.end_pod(namespace, pods_of(admin, namespace, finished)[0]["metadata"]["name"])
    (job,) = [j for j in objects(admin, "jobs", namespace, f"kubelab.io/experiment={deleted}")]
    client.BatchV1Api(admin).delete_namespaced_job(
        job["metadata"]["name"], namespace, propagation_policy="Background"
    )
    for run_id in (running, finished, deleted):  # make the deleted one older than the grace
        spec_file = home / "runs" / run_id / "spec.json"
        os.utime(spec_file, (spec_file.stat().st_atime, spec_file.stat().st_mtime - 60))
    wait_for(lambda: not objects(admin, "jobs", namespace, f"kubelab.io/experiment={deleted}"))
    wait_for(
        lambda: objects(admin, "jobs", namespace, f"kubelab.io/experiment={finished}")[0]["status"].get(
            "succeeded"
        ),
        what="the Job controller counts the success",
    )
    # a CLI-like instance without watches rebuilds state from the cluster
    cli = Experiments(home=home, backend=make_backend(start=False), user="alice")
    assert cli.get(running)["status"] == "Running"
    assert cli.get(finished)["status"] == "Succeeded"
    assert cli.get(deleted)["status"] == "Failed"
    assert "no longer exists" in cli.get(deleted)["reason"]
    # a new server instance picks up the live one through its watches
    server = Experiments(home=home, backend=make_backend(), user="alice")
    simulated_cluster.end_pod(namespace, pods_of(admin, namespace, running)[0]["metadata"]["name"])
    wait_for(lambda: server.get(running)["status"] == "Succeeded", what="Succeeded after restart")


def test_logs_follow_until_the_end(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    name = wait_for(lambda: pods_of(admin, namespace, record["id"]))[0]["metadata"]["name"]
    simulated_cluster.append_log(namespace, name, "line one")
    wait_until(lab, record["id"], "Running")
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.extend(lab.logs(record["id"], follow=True)))
    reader.start()
    wait_for(lambda: "line one" in "".join(chunks), what="followed output")
    simulated_cluster.append_log(namespace, name, "line two")
    wait_for(lambda: "line two" in "".join(chunks), what="followed output")
    simulated_cluster.end_pod(namespace, name)
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert "line one\nline two" in "".join(chunks)
