"""A project group's "all members together" quota is the API server's to enforce.

Each member namespace gets a ResourceQuota holding its share of the group's total (see
`kubelab.spawner.group_quota`), so on the real control plane a member's notebook token that asks
for more than its share has its Job's pods refused by the API server, whether it asks the API
server directly or through kubelab's CLI or REST API; within the share they are created. Pods
directly are refused by RBAC (`test_pod_security_cluster.py`), so Jobs are the notebook's only
way to run something.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.fixtures import RealCluster
from controlplane.objects import create_renamed, delete_namespaces
from jupyter_server_process import JupyterServer
from kubelab_testing import manifest, plain
from kubernetes import client, config

from kubelab.spawner.cli import render
from kubelab.spawner.group_quota import member_share, namespace_quota
from kubelab.spawner.groups import Quota

HUB_CONFIG = Path(__file__).resolve().parents[2] / "hub_config" / "jupyterhub_config.py"
IMAGE = "registry.example.org/lab/notebook:1"
VISION = {
    "users": ["alice", "bob"],
    "properties": {"quota": {"user": {"gpus": 4}, "group": {"gpus": 2, "cpu": "3", "memory": "16Gi"}}},
}


def test_a_members_share_is_the_group_total_divided_and_rounded_down() -> None:
    assert member_share(Quota(gpus=5, cpu="3", memory="1Gi"), 2) == Quota(
        gpus=2, cpu="1500m", memory="536870912"
    )
    assert namespace_quota(Quota(gpus=4, cpu="1"), Quota(gpus=2, cpu="3"), 2) == Quota(gpus=1, cpu="1")
    assert namespace_quota(Quota(memory="8Gi"), Quota(), 3) == Quota(memory="8Gi")  # no group quota
    assert namespace_quota(Quota(), Quota(gpus=3), None) == Quota(gpus=3)  # membership unknown


def vision_config(tmp_path: Path) -> Path:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(
        f"c = get_config()  # noqa\nload_subconfig({str(HUB_CONFIG)!r})  # noqa\n"
        f"c.JupyterHub.load_groups = {{'vision': {VISION!r}}}\n"
    )
    return path


def test_render_shows_each_members_share_as_its_resource_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    objects = render("alice", ["vision"], {"group": "vision"}, vision_config(tmp_path))
    quota = next(o for o in objects if o["kind"] == "ResourceQuota")
    shares = {k: v for k, v in quota["spec"]["hard"].items() if k.split(".")[0] == "requests"}
    assert shares == {
        "requests.nvidia.com/gpu": "1",
        "requests.cpu": "1500m",
        "requests.memory": "8589934592",
        "requests.storage": "350Gi",  # the namespace's bounds (test_namespace_bounds.py)
        "requests.ephemeral-storage": "200Gi",
    }


def gpu_job(name: str, gpus: int) -> dict[str, Any]:
    resources = {
        "requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)},
        "limits": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "train", "image": IMAGE, "resources": resources}],
                }
            },
        },
    }


BEYOND = {"gpus": 2, "cpu": "100m", "memory": "64Mi"}  # the group's whole total


def ask_through_kubelab(namespace: str, notebook: Path, home: Path) -> None:
    """The member's notebook asks for the group's total through kubelab's CLI and REST API,
    with its own token, as `kubelab run` and the sidebar would."""
    env = {
        "KUBELAB_BACKEND": "kubernetes",
        "KUBECONFIG": str(notebook),
        "KUBELAB_NAMESPACE": namespace,
        "KUBELAB_IMAGE": IMAGE,
        "KUBELAB_USER": "alice",
        "KUBELAB_HOME": str(home / "cli"),
    }
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubelab.cli",
            "run",
            "--name",
            "cli-beyond",
            "--gpus",
            "2",
            "--cpu",
            "100m",
            "--memory",
            "64Mi",
            "--",
            "python",
            "-c",
            "pass",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    rest_env = {**env, "KUBELAB_HOME": str(home / "rest")}
    with JupyterServer(home / "root", home / "server", env=rest_env) as server:
        reply = server.post(
            "experiments", {"name": "rest-beyond", "command": ["python", "-c", "pass"], "resources": BEYOND}
        )
        assert reply.status_code == 201, reply.text


def quota_refusals(core: client.CoreV1Api, namespace: str) -> dict[str, str]:
    """The Jobs whose pods the API server refused for the quota, by Job name."""
    return {
        e["involvedObject"]["name"]: e["message"]
        for e in plain(core.list_namespaced_event(namespace))["items"]
        if e.get("reason") == "FailedCreate" and "exceeded quota" in e.get("message", "")
    }


@pytest.mark.cluster
def test_members_together_cannot_exceed_the_group_quota_by_asking_the_api_server(
    cluster: ControlPlane | RealCluster, kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    wanted = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ResourceQuota")
    prepared = [
        o
        for user in ("alice", "bob")
        for o in render(user, ["vision"], {"group": "vision"}, vision_config(tmp_path))
        if o["kind"] in wanted
    ]
    _, names = create_renamed(kubeconfig, prepared, ["user-alice", "user-bob"])
    try:
        for member, namespace in names.items():
            token = cluster.token_for(namespace, "kubelab-notebook")
            notebook = cluster.write_kubeconfig(tmp_path / member, token=token, namespace=namespace)
            with config.new_client_from_config(str(notebook)) as api:
                batch = client.BatchV1Api(api)
                batch.create_namespaced_job(namespace, manifest(gpu_job("beyond-share", 2)))
                batch.create_namespaced_job(namespace, manifest(gpu_job("within-share", 1)))
                with pytest.raises(client.ApiException) as edit:  # nor may it raise its own quota
                    client.CoreV1Api(api).patch_namespaced_resource_quota(
                        "kubelab-quota", namespace, {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}
                    )
                assert edit.value.status == 403
            if member == "user-alice":
                ask_through_kubelab(namespace, notebook, tmp_path / "kubelab")
        with config.new_client_from_config(str(kubeconfig)) as api:
            core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
            for member, namespace in names.items():
                jobs = {
                    j["metadata"]["name"] for j in plain(batch.list_namespaced_job(namespace))["items"]
                } - {"within-share"}
                refusals: dict[str, str] = {}
                for _ in range(300):
                    refusals = quota_refusals(core, namespace)
                    if set(refusals) >= jobs and core.list_namespaced_pod(namespace).items:
                        break
                    time.sleep(0.1)
                assert len(jobs) == (3 if member == "user-alice" else 1), jobs  # direct, CLI, REST
                assert set(refusals) == jobs, (jobs, refusals)
                for message in refusals.values():
                    assert "requested: requests.nvidia.com/gpu=2" in message, message
                    assert "limited: requests.nvidia.com/gpu=1" in message, message
                owners = [
                    p["metadata"]["ownerReferences"][0]["name"]
                    for p in plain(core.list_namespaced_pod(namespace))["items"]
                ]
                assert owners == ["within-share"], owners
            held = sum(
                int(
                    plain(core.read_namespaced_resource_quota("kubelab-quota", ns))["status"]["used"][
                        "requests.nvidia.com/gpu"
                    ]
                )
                for ns in names.values()
            )
            assert held == 2  # the members together hold exactly the group's total
    finally:
        delete_namespaces(kubeconfig, *names.values())
