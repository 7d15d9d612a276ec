"""On the real control plane: a notebook's own token tries the escalations of a hostile user,
and the API server refuses them in a namespace the spawner prepared."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.fixtures import RealCluster
from controlplane.objects import create_renamed, delete_namespaces
from kubelab_testing import manifest
from kubernetes import client, config

from kubelab.spawner.cli import render

IMAGE = "registry.example.org/lab/notebook:1"
ESCALATIONS: dict[str, dict[str, Any]] = {
    "privileged": {"containers": [{"name": "c", "image": IMAGE, "securityContext": {"privileged": True}}]},
    "hostPID": {"hostPID": True, "containers": [{"name": "c", "image": IMAGE}]},
    "hostPath": {
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [
            {"name": "c", "image": IMAGE, "volumeMounts": [{"name": "root", "mountPath": "/host"}]}
        ],
    },
}


def job(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", **pod_spec}}},
    }


@pytest.mark.cluster
def test_a_notebook_token_cannot_start_privileged_host_pods(
    cluster: ControlPlane | RealCluster, kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    prepared = [
        o
        for o in render("alice", [], {})
        if o["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")
    ]
    _, names = create_renamed(kubeconfig, prepared, ["user-alice"])
    namespace = names["user-alice"]
    try:
        token = cluster.token_for(namespace, "kubelab-notebook")
        notebook = cluster.write_kubeconfig(tmp_path / "notebook", token=token, namespace=namespace)
        with config.new_client_from_config(str(notebook)) as api:
            core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
            with pytest.raises(client.ApiException) as refused:  # no pods at all from a notebook
                core.create_namespaced_pod(
                    namespace,
                    manifest(
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "metadata": {"name": "direct"},
                            "spec": ESCALATIONS["privileged"],
                        }
                    ),
                )
            assert refused.value.status == 403
            for name, spec in ESCALATIONS.items():  # Jobs it may create: their pods are refused
                batch.create_namespaced_job(namespace, manifest(job(name.lower(), spec)))
        with config.new_client_from_config(str(kubeconfig)) as api:
            core = client.CoreV1Api(api)
            refusals: dict[str, str] = {}
            for _ in range(300):
                for event in core.list_namespaced_event(namespace).items:
                    if event.reason == "FailedCreate" and "violates PodSecurity" in (event.message or ""):
                        refusals[str(event.involved_object.name)] = str(event.message)
                if len(refusals) == len(ESCALATIONS):
                    break
                time.sleep(0.1)
            assert sorted(refusals) == sorted(n.lower() for n in ESCALATIONS), refusals
            assert core.list_namespaced_pod(namespace).items == []
            with pytest.raises(client.ApiException) as direct:  # nor an admin: the namespace's policy
                core.create_namespaced_pod(
                    namespace,
                    manifest(
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "metadata": {"name": "admin-direct"},
                            "spec": ESCALATIONS["hostPID"],
                        }
                    ),
                )
            assert direct.value.status == 403 and "violates PodSecurity" in str(direct.value.body)
    finally:
        delete_namespaces(kubeconfig, namespace)
