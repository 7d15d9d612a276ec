"""Experiments through `Lab(backend=KubernetesBackend(...))`: submit, states, stop, logs."""

from __future__ import annotations

from pathlib import Path

from conftest import pods_of, wait_for

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
