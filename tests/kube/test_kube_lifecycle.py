"""Experiments through `Lab(backend=KubernetesBackend(...))`: submit, states, stop, logs."""

from __future__ import annotations

import os
from pathlib import Path

from kube_support import pods_of, wait_for

from kubelab.lab import Lab

NODE_LABELS = {"lab.example.org/project": "vision", "gpu-type": "A100"}


def test_single_experiment_end_to_end(kube_api, lab: Lab, namespace: str, home: Path) -> None:
    kube_api.add_node("gpu-1", gpus=4, labels=NODE_LABELS)
    record = lab.submit({"command": ["python", "train.py"], "resources": {"cpu": "1",
                        "memory": "1Gi", "gpus": 1}}, base_dir=home)
    run_id = record["id"]
    assert record["status"] == "Pending"
    pod = wait_for(lambda: pods_of(kube_api, namespace, run_id), what="the pod")[0]
    name = pod["metadata"]["name"]
    kube_api.run_pod(namespace, name)
    wait_for(lambda: lab.get(run_id)["status"] == "Running", what="Running")
    kube_api.append_log(namespace, name, "epoch 1 loss 0.5")
    kube_api.succeed_pod(namespace, name)
    final = wait_for(lambda: (r := lab.get(run_id))["status"] == "Succeeded" and r,
                     what="Succeeded")
    assert final["exit_code"] == 0
    assert [t["state"] for t in final["history"]][-2:] == ["Running", "Succeeded"]
    assert "epoch 1 loss 0.5" in "".join(lab.logs(run_id))


def test_stop_deletes_job_pods_and_service(kube_api, lab: Lab, namespace: str,
                                           home: Path) -> None:
    kube_api.add_node("n1", labels=NODE_LABELS)
    record = lab.submit({"command": ["python", "train.py"], "framework": "pytorch",
                         "replicas": 2}, base_dir=home)
    pods = wait_for(lambda: len(p := pods_of(kube_api, namespace, record["id"])) == 2 and p)
    kube_api.run_pod(namespace, pods[0]["metadata"]["name"])
    kube_api.append_log(namespace, pods[0]["metadata"]["name"], "step 7")
    stopped = lab.stop(record["id"])
    assert stopped["status"] == "Stopped" and stopped["reason"] == "stopped by user"
    assert not kube_api.objects("jobs.batch", namespace)
    assert not kube_api.objects("services", namespace)
    wait_for(lambda: not pods_of(kube_api, namespace, record["id"]), what="pods deleted")
    assert "step 7" in "".join(lab.logs(record["id"]))  # kept in the run directory
    assert lab.get(record["id"])["status"] == "Stopped"


def test_pruned_stop(kube_api, lab: Lab, home: Path) -> None:
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    assert lab.stop(record["id"], pruned=True)["status"] == "Pruned"


def test_restart_recovery_rebuilds_state(kube_api, make_backend, namespace: str,
                                         home: Path) -> None:
    kube_api.add_node("n1", labels=NODE_LABELS)
    first = Lab(home=home, backend=make_backend(), user="alice")
    running = first.submit({"command": ["python", "a.py"]}, base_dir=home)["id"]
    finished = first.submit({"command": ["python", "b.py"]}, base_dir=home)["id"]
    deleted = first.submit({"command": ["python", "c.py"]}, base_dir=home)["id"]
    first.backend.close()  # the server goes away; the cluster carries on
    kube_api.run_pod(namespace, pods_of(kube_api, namespace, running)[0]["metadata"]["name"])
    kube_api.succeed_pod(namespace, pods_of(kube_api, namespace, finished)[0]["metadata"]["name"])
    (job,) = [j for j in kube_api.objects("jobs.batch", namespace)
              if j["metadata"]["labels"]["kubelab.io/experiment"] == deleted]
    kube_api.cluster.delete(kube_api.cluster.rt("jobs.batch"), namespace,
                            job["metadata"]["name"], propagation="Background")
    for run_id in (running, finished, deleted):  # make the deleted one older than the grace
        spec_file = home / "runs" / run_id / "spec.json"
        os.utime(spec_file, (spec_file.stat().st_atime, spec_file.stat().st_mtime - 60))
    # a CLI-like instance without watches rebuilds state from the cluster
    cli = Lab(home=home, backend=make_backend(start=False), user="alice")
    assert cli.get(running)["status"] == "Running"
    assert cli.get(finished)["status"] == "Succeeded"
    assert cli.get(deleted)["status"] == "Failed"
    assert "no longer exists" in cli.get(deleted)["reason"]
    # a new server instance picks up the live one through its watches
    server = Lab(home=home, backend=make_backend(), user="alice")
    kube_api.succeed_pod(namespace, pods_of(kube_api, namespace, running)[0]["metadata"]["name"])
    wait_for(lambda: server.get(running)["status"] == "Succeeded", what="Succeeded after restart")


def test_logs_follow_until_the_end(kube_api, lab: Lab, namespace: str, home: Path) -> None:
    import threading

    kube_api.add_node("n1", labels=NODE_LABELS)
    record = lab.submit({"command": ["python", "train.py"]}, base_dir=home)
    name = wait_for(lambda: pods_of(kube_api, namespace, record["id"]))[0]["metadata"]["name"]
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.extend(lab.logs(record["id"], follow=True)))
    reader.start()
    kube_api.run_pod(namespace, name)
    kube_api.append_log(namespace, name, "line one")
    wait_for(lambda: "line one" in "".join(chunks), what="followed output")
    kube_api.append_log(namespace, name, "line two")
    kube_api.succeed_pod(namespace, name)
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert "line one\nline two" in "".join(chunks)
