"""A real JupyterHub with KubeLabSpawner against a real control plane.

One hub and one control plane for the module (JupyterHub is slow to start), with exactly the
nodes below, since the form shows the whole cluster's GPUs. The API server validates and admits
every object the spawner creates and enforces RBAC, the scheduler places the notebook pods, KWOK
runs them on 127.0.0.1, and a stand-in answers for the single-user server there (see conftest.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane, NodeSpec
from controlplane.fixtures import RealCluster
from hub_process import Hub, cluster_hub, listed
from kubelab_testing import JsonStandIn, manifest
from kubernetes import client, config

GROUPS = {
    "public": {"users": [], "properties": {"quota": {"user": {"gpus": 1}}}},
    "vision": {
        "users": ["alice"],
        "properties": {
            "node_selector": "org=vision",
            "volume_mount": "datasets(pvc):/datasets;8G(memory):/dev/shm",
            "quota": {"user": {"gpus": 3, "cpu": "16", "memory": "64Gi"}, "group": {"gpus": 4}},
        },
    },
    "broken": {"users": ["mallory"], "properties": {"quota": "lots", "volume_mount": "x(pvc)/mnt"}},
    # a host folder: Pod Security (baseline, enforced by the API server) refuses it
    "hostdata": {"users": ["oscar"], "properties": {"volume_mount": "data/aidata(hostpath):/aidata"}},
}


NODES = (
    NodeSpec("v100-node", cpu="64", memory="256Gi", gpus=4, gpu_type="V100", labels={"org": "vision"}),
    NodeSpec("t4-node", cpu="32", memory="128Gi", gpus=2, gpu_type="T4"),
    NodeSpec("cpu-node", cpu="32", memory="128Gi"),
)


@pytest.fixture(scope="module")
def kube(
    cluster: ControlPlane | RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    if not isinstance(cluster, ControlPlane):
        pytest.skip("counts every GPU of the cluster; KUBELAB_TEST_KUBECONFIG points at a real one")
    with ControlPlane(tmp_path_factory.mktemp("hub-cluster"), nodes=NODES) as plane:
        yield plane


@pytest.fixture(scope="module")
def hub(
    kube: ControlPlane, pod_stand_in: JsonStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hub]:
    directory = tmp_path_factory.mktemp("kubehub")
    overrides = "c.KubeLabSpawner.cluster_context = 'kubelab'\n"
    with cluster_hub(kube, directory, pod_stand_in.port, GROUPS, overrides) as running:
        yield running


def wait_pod(kube: ControlPlane, namespace: str, name: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pod in listed(kube, f"/api/v1/namespaces/{namespace}/pods"):
            if pod["metadata"]["name"] == name:
                return pod
        time.sleep(0.1)
    raise AssertionError(f"pod {namespace}/{name} was never created")


def by_kind(kube: ControlPlane, namespace: str) -> dict[str, list[str]]:
    found = {}
    for kind, path in (
        ("serviceaccounts", "/api/v1/namespaces/{}/serviceaccounts"),
        ("roles", "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/roles"),
        ("rolebindings", "/apis/rbac.authorization.k8s.io/v1/namespaces/{}/rolebindings"),
        ("resourcequotas", "/api/v1/namespaces/{}/resourcequotas"),
        ("persistentvolumeclaims", "/api/v1/namespaces/{}/persistentvolumeclaims"),
        ("pods", "/api/v1/namespaces/{}/pods"),
    ):
        found[kind] = sorted(o["metadata"]["name"] for o in listed(kube, path.format(namespace)))
    return found


def namespaces(kube: ControlPlane) -> list[str]:
    return [
        n["metadata"]["name"]
        for n in listed(kube, "/api/v1/namespaces")
        if not n["metadata"].get("deletionTimestamp")
    ]


def start_and_run(hub: Hub, kube: ControlPlane, user: str) -> dict[str, Any]:
    pod = wait_pod(kube, f"user-{user}", f"jupyter-{user}")
    hub.wait_server(user)  # scheduled, run by KWOK on 127.0.0.1, answered by the stand-in
    return pod


def test_form_shows_fields_and_live_availability(hub: Hub) -> None:
    page = hub.spawn_page(hub.login("alice"), "alice")
    for field in (
        'name="group"',
        'name="image"',
        'name="cpu"',
        'name="memory"',
        'name="gpus"',
        'name="gpu_type"',
        'name="shm"',
        'name="profile"',
    ):
        assert field in page
    assert '<option value="vision" selected>' in page  # a project group before public
    assert '<tr data-gpu-type="V100"><td>V100</td><td class="free">4</td><td class="total">4</td>' in page
    assert '<tr data-gpu-type="A100"><td>A100</td><td class="free">0</td><td class="total">0</td>' in page


def test_spawn_through_the_form_then_stop(hub: Hub, kube: ControlPlane, pod_stand_in: JsonStandIn) -> None:
    # the group's shared dataset claim, which an admin made in the user's namespace beforehand
    kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": "user-alice"}})
    kube.request(
        "POST",
        "/api/v1/namespaces/user-alice/persistentvolumeclaims",
        {
            "metadata": {"name": "datasets"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
        },
    )
    session = hub.login("alice")
    hub.spawn_accepted(
        session,
        "alice",
        {
            "group": "vision",
            "gpus": "2(nvidia,V100)",
            "cpu": "4",
            "memory": "16Gi",
            "image": "kubelab/notebook:0.1.0",
        },
    )
    pod = start_and_run(hub, kube, "alice")
    objects = by_kind(kube, "user-alice")
    assert objects == {
        "serviceaccounts": ["default", "kubelab-notebook"],
        "roles": ["kubelab-notebook"],
        "rolebindings": ["kubelab-notebook"],
        "resourcequotas": ["kubelab-quota"],
        "persistentvolumeclaims": ["datasets", "kubelab-home"],  # one claim, two folders
        "pods": ["jupyter-alice"],
    }
    quota = listed(kube, "/api/v1/namespaces/user-alice/resourcequotas")[0]
    hard = quota["spec"]["hard"]  # beside the namespace's object counts (docs/security.md)
    assert {k: hard[k] for k in ("requests.nvidia.com/gpu", "requests.cpu", "requests.memory")} == {
        "requests.nvidia.com/gpu": "3",
        "requests.cpu": "16",
        "requests.memory": "64Gi",
    }
    spec = pod["spec"]
    container = spec["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["limits"]["cpu"] == container["resources"]["requests"]["cpu"] == "4"
    assert container["resources"]["limits"]["memory"] == "16Gi"
    assert spec["nodeSelector"] == {"gpu-type": "V100", "org": "vision"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert spec["serviceAccountName"] == "kubelab-notebook"
    assert container["workingDir"] == "/mnt/alice"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes[mounts["/mnt/alice"]["name"]]["persistentVolumeClaim"]["claimName"] == "kubelab-home"
    assert volumes[mounts["/archives/alice"]["name"]]["persistentVolumeClaim"]["claimName"] == "kubelab-home"
    assert (mounts["/mnt/alice"]["subPath"], mounts["/archives/alice"]["subPath"]) == ("workspace", "archive")
    assert volumes[mounts["/datasets"]["name"]]["persistentVolumeClaim"]["claimName"] == "datasets"
    assert volumes[mounts["/dev/shm"]["name"]]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8G"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBELAB_NAMESPACE"] == "user-alice"
    assert env["KUBELAB_IMAGE"] == "kubelab/notebook:0.1.0"
    assert env["KUBELAB_USER"] == "alice" and env["KUBELAB_PROJECT"] == "vision"
    assert json.loads(env["KUBELAB_NODE_SELECTOR"]) == {"org": "vision"}
    assert json.loads(env["KUBELAB_TOLERATIONS"])[0]["key"] == "nvidia.com/gpu"
    assert (env["KUBELAB_GPU_RESOURCE"], env["KUBELAB_GPU_TYPE_LABEL"], env["KUBELAB_GPU_TYPE"]) == (
        "nvidia.com/gpu",
        "gpu-type",
        "V100",
    )
    shared = json.loads(env["KUBELAB_VOLUMES"])
    assert {m["mountPath"] for m in shared["mounts"]} == {
        "/mnt/alice",
        "/archives/alice",
        "/datasets",
    }
    assert env["KUBELAB_SHM"] == "8G" and env["KUBELAB_HOME"] == "/mnt/alice/.kubelab"
    assert env["KUBELAB_BACKEND"] == "kubernetes" and env["KUBELAB_SERVICE_ACCOUNT"] == "kubelab-notebook"
    assert "NVIDIA_VISIBLE_DEVICES" not in env

    # the hub routes the user to "the pod"
    assert session.get(f"{hub.url}/user/alice/api/status", timeout=30).status_code == 200
    assert any(p.startswith("/user/alice/") for p in pod_stand_in.paths)
    # the watch saw the GPUs go: the form shows 2 of 4 V100 free
    page = hub.spawn_page(session, "alice", "second")
    assert '<td>V100</td><td class="free">2</td><td class="total">4</td>' in page

    assert hub.api("DELETE", "users/alice/server").status_code in (202, 204)
    hub.wait_server("alice", ready=False)
    assert listed(kube, "/api/v1/namespaces/user-alice/pods") == []
    assert (
        len(listed(kube, "/api/v1/namespaces/user-alice/persistentvolumeclaims")) == 2
    )  # the workspace stays


def test_rest_api_spawn_without_gpus(hub: Hub, kube: ControlPlane) -> None:
    hub.api("POST", "users", {"usernames": ["bob"]})
    reply = hub.api("POST", "users/bob/server", {"gpus": 0, "cpu": "1", "memory": "2Gi"})
    assert reply.status_code in (201, 202), reply.text
    pod = start_and_run(hub, kube, "bob")
    # the API server omits an empty value
    env = {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "none" and env["KUBELAB_GPU_TYPE"] == ""
    assert "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"].get("limits", {})
    assert "gpu-type" not in (pod["spec"].get("nodeSelector") or {})
    assert env["KUBELAB_PROJECT"] == "public"


@pytest.mark.parametrize(
    ("form", "sentence"),
    [
        ({"gpus": "-1"}, "gpus: must not be negative, not -1"),
        ({"gpus": "0.5"}, "gpus: a share of a GPU (0.5) needs a time-sliced GPU type, and this hub has none"),
        ({"gpus": "0.3(T4)"}, "gpus: must be a whole number of GPUs, or 1/n of one GPU to share it"),
        ({"gpus": "1", "gpu_type": "P100"}, "gpu_type: unknown GPU type &#39;P100&#39;"),
        ({"image": "docker.io/evil:latest"}, "image: unknown image &#39;docker.io/evil:latest&#39;"),
        ({"profile": "huge"}, "profile: unknown profile &#39;huge&#39;"),
        (
            {"gpus": "2(T4)"},
            "group &#39;public&#39; allows each user 1 GPU(s) at once; you hold 0, so you "
            "can ask for at most 1 more, not 2",
        ),
        (
            {"gpus": "1(A100)"},
            "you asked for 1 A100 GPU(s) but only 0 of 0 are free now; free by type: "
            "T4 2/2, V100 4/4, A100 0/0, H100 0/0",
        ),
    ],
)
def test_refusals_show_in_the_form(hub: Hub, kube: ControlPlane, form: dict[str, Any], sentence: str) -> None:
    page = hub.spawn_refused(hub.login("carol"), "carol", form, sentence)
    assert 'name="gpus"' in page  # the form is shown again
    assert "user-carol" not in namespaces(kube)


def test_group_properties_of_the_wrong_type(hub: Hub, kube: ControlPlane) -> None:
    page = hub.spawn_page(hub.login("mallory"), "mallory")
    assert "groups.broken.quota: must be a mapping with &#x27;user&#x27; and/or &#x27;group&#x27;" in page
    assert "groups.broken.volume_mount: entry &#x27;x(pvc)/mnt&#x27; at position 1" in page
    reply = hub.api("POST", "users/mallory/server", {})
    assert reply.status_code >= 400
    assert "user-mallory" not in namespaces(kube)


def test_a_notebook_account_cannot_touch_another_user(hub: Hub, kube: ControlPlane, tmp_path: Path) -> None:
    for user in ("dave", "erin"):
        hub.api("POST", "users", {"usernames": [user]})
        assert hub.api("POST", f"users/{user}/server", {"gpus": 0}).status_code in (201, 202)
        start_and_run(hub, kube, user)
    token = kube.token_for("user-dave", "kubelab-notebook")  # what the pod's mounted token would be
    path = kube.write_kubeconfig(tmp_path / "dave", token=token)
    with config.new_client_from_config(str(path)) as api:
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        assert [p.metadata and p.metadata.name for p in core.list_namespaced_pod("user-dave").items] == [
            "jupyter-dave"
        ]
        job = {
            "metadata": {"name": "train"},
            "spec": {
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}
                }
            },
        }
        batch.create_namespaced_job("user-dave", manifest(job))  # own namespace: allowed
        denied: list[Callable[[], object]] = [
            lambda: core.list_namespaced_pod("user-erin"),
            lambda: core.read_namespaced_pod("jupyter-erin", "user-erin"),
            lambda: core.delete_namespaced_pod("jupyter-erin", "user-erin"),
            lambda: batch.create_namespaced_job("user-erin", manifest(job)),
            lambda: core.list_namespaced_persistent_volume_claim("user-erin"),
            lambda: core.list_pod_for_all_namespaces(),
            lambda: core.list_namespace(),
            lambda: core.list_namespaced_secret("user-dave"),
        ]
        for call in denied:
            with pytest.raises(client.ApiException) as refused:
                call()
            assert refused.value.status == 403


def test_pod_security_refusal_reaches_the_form_as_a_sentence(hub: Hub, kube: ControlPlane) -> None:
    """The API server's Pod Security admission refuses a hostPath mount in a user namespace
    (baseline); the user reads its reason above the form, not a bare 500."""
    page = hub.spawn_refused(hub.login("oscar"), "oscar", {"group": "hostdata", "gpus": "0"})
    assert (
        "violates PodSecurity &quot;baseline:latest&quot;: hostPath volumes" in page
        or "violates PodSecurity &#34;baseline:latest&#34;: hostPath volumes" in page
    ), page[-3000:]
    assert listed(kube, "/api/v1/namespaces/user-oscar/pods") == []
