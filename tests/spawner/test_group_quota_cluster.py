"""A project group's "all members together" quota is the API server's to enforce.

Each member namespace gets a ResourceQuota holding its share of the group's total (see
`kubelab.spawner.group_quota`), so on the real control plane a member's notebook token that asks
for more than its share, through a Job it may create, has the Job's pods refused by the API
server; within the share they are created. Pods directly are refused by RBAC
(`test_pod_security_cluster.py`), so Jobs are the notebook's only way to run something.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from controlplane.objects import create_renamed, delete_namespaces
from kubernetes import client, config

from kubelab.spawner.cli import render
from kubelab.spawner.group_quota import member_share, namespace_quota
from kubelab.spawner.groups import Quota

HUB_CONFIG = Path(__file__).resolve().parents[2] / "hub_config" / "jupyterhub_config.py"
IMAGE = "registry.example.org/lab/notebook:1"
VISION = {"users": ["alice", "bob"], "properties": {
    "quota": {"user": {"gpus": 4}, "group": {"gpus": 2, "cpu": "3", "memory": "16Gi"}}}}


def test_a_members_share_is_the_group_total_divided_and_rounded_down() -> None:
    assert member_share(Quota(gpus=5, cpu="3", memory="1Gi"), 2) == Quota(gpus=2, cpu="1500m", memory="536870912")
    assert namespace_quota(Quota(gpus=4, cpu="1"), Quota(gpus=2, cpu="3"), 2) == Quota(gpus=1, cpu="1")
    assert namespace_quota(Quota(memory="8Gi"), Quota(), 3) == Quota(memory="8Gi")  # no group quota
    assert namespace_quota(Quota(), Quota(gpus=3), None) == Quota(gpus=3)  # membership unknown


def vision_config(tmp_path: Path) -> Path:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(f"c = get_config()  # noqa\nload_subconfig({str(HUB_CONFIG)!r})  # noqa\n"
                    f"c.JupyterHub.load_groups = {{'vision': {VISION!r}}}\n")
    return path


def test_render_shows_each_members_share_as_its_resource_quota(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    objects = render("alice", ["vision"], {"group": "vision"}, vision_config(tmp_path))
    quota = next(o for o in objects if o["kind"] == "ResourceQuota")
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "1", "requests.cpu": "1500m",
                                     "requests.memory": "8589934592"}


def gpu_job(name: str, gpus: int) -> dict:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)},
                 "limits": {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "train", "image": IMAGE, "resources": resources}]}}}}


@pytest.mark.cluster
def test_members_together_cannot_exceed_the_group_quota_by_asking_the_api_server(
        cluster, kubeconfig: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    wanted = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ResourceQuota")
    prepared = [o for user in ("alice", "bob")
                for o in render(user, ["vision"], {"group": "vision"}, vision_config(tmp_path))
                if o["kind"] in wanted]
    _, names = create_renamed(kubeconfig, prepared, ["user-alice", "user-bob"])
    try:
        for member, namespace in names.items():
            token = cluster.token_for(namespace, "kubelab-notebook")
            notebook = cluster.write_kubeconfig(tmp_path / member, token=token, namespace=namespace)
            with config.new_client_from_config(str(notebook)) as api:
                batch = client.BatchV1Api(api)
                batch.create_namespaced_job(namespace, gpu_job("beyond-share", 2))  # the group's whole total
                batch.create_namespaced_job(namespace, gpu_job("within-share", 1))
                with pytest.raises(client.ApiException) as edit:  # nor may it raise its own quota
                    client.CoreV1Api(api).patch_namespaced_resource_quota(
                        "kubelab-quota", namespace, {"spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
                assert edit.value.status == 403
        with config.new_client_from_config(str(kubeconfig)) as api:
            core = client.CoreV1Api(api)
            for namespace in names.values():
                refusal = ""
                for _ in range(300):
                    refusal = next((e.message for e in core.list_namespaced_event(namespace).items
                                    if e.reason == "FailedCreate" and e.involved_object.name == "beyond-share"
                                    and "exceeded quota" in (e.message or "")), "")
                    pods = core.list_namespaced_pod(namespace).items
                    if refusal and pods:
                        break
                    time.sleep(0.1)
                assert "requested: requests.nvidia.com/gpu=2" in refusal and "limited: requests.nvidia.com/gpu=1" in refusal
                owners = [p.metadata.owner_references[0].name for p in core.list_namespaced_pod(namespace).items]
                assert owners == ["within-share"], owners
            held = sum(int(core.read_namespaced_resource_quota("kubelab-quota", ns).status.used
                           ["requests.nvidia.com/gpu"]) for ns in names.values())
            assert held == 2  # the members together hold exactly the group's total
    finally:
        delete_namespaces(kubeconfig, *names.values())
