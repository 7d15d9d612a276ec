"""A notebook server of a DRA GPU type, through a real JupyterHub on a real control plane.

The test plays the cluster admin (a DeviceClass) and the DRA driver (a ResourceSlice of two
devices for a KWOK node; tests/controlplane/dra.py). The hub runs with the shipped ClusterRole;
the API server, its quota and admission, the resourceclaim controller, the garbage collector
and the scheduler are the real ones: the spawner's pod claims from its ResourceClaimTemplate, the
scheduler allocates it a device and binds it, the claim goes with the server, and a second
server beyond the namespace's quota on the class's devices is refused in the quota's words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from controlplane.cluster import ControlPlane, NodeSpec
from controlplane.dra import device_class, publish_slice
from controlplane.fixtures import RealCluster
from hub_process import Hub, cluster_hub, hub_samples, listed
from kubelab_testing import JsonStandIn
from kubernetes import config

from kubelab.spawner.availability import group_label

GROUPS = {"public": {"users": [], "properties": {"quota": {"user": {"gpus": 1}}}}}
NODE = "dra-node"


@pytest.fixture(scope="module")
def kube(
    cluster: ControlPlane | RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    if not isinstance(cluster, ControlPlane):
        pytest.skip("plays a DRA driver for a simulated node; KUBELAB_TEST_KUBECONFIG points at a real one")
    with ControlPlane(tmp_path_factory.mktemp("dra-cluster"), nodes=(NodeSpec(NODE),)) as plane:
        yield plane


@pytest.fixture(scope="module")
def driver(kube: ControlPlane) -> Iterator[str]:
    """The DeviceClass, after its driver published two A100s on the node."""
    with config.new_client_from_config(str(kube.kubeconfig)) as admin, device_class(admin) as name:
        publish_slice(admin, name, NODE, ["A100", "A100"])
        yield name


@pytest.fixture(scope="module")
def hub(
    kube: ControlPlane, driver: str, pod_stand_in: JsonStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hub]:
    catalog = {
        "images": ["kubelab/notebook:0.1.0"],
        "gpu_types": [
            {
                "name": "A100-dra",
                "device_class": driver,
                "selector": f'device.attributes["{driver}"].model == "A100"',
            }
        ],
    }
    directory = tmp_path_factory.mktemp("drahub")
    overrides = (
        f"c.KubeLabSpawner.gpu_catalog = {catalog!r}\n"
        "c.JupyterHub.authenticate_prometheus = False\n"  # the metrics test scrapes /hub/metrics
    )
    with cluster_hub(kube, directory, pod_stand_in.port, GROUPS, overrides) as running:
        yield running


def until(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)
    return found


def spawn_one_device(hub: Hub, kube: ControlPlane, session: requests.Session, user: str) -> dict[str, Any]:
    """Spawn `user`'s server with one A100-dra device through the form, and wait until its pod is
    bound and the hub has it ready: the pod."""
    hub.spawn_accepted(session, user, {"gpus": "1(A100-dra)", "cpu": "1", "memory": "2Gi"})
    pods = f"/api/v1/namespaces/user-{user}/pods"
    pod: dict[str, Any] = until(
        lambda: next((p for p in listed(kube, pods) if (p.get("spec") or {}).get("nodeName")), None),
        f"{user}'s notebook pod bound",
    )
    hub.wait_server(user)
    return pod


def choice(page: str) -> str:
    options: dict[str, str] = dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', page))
    return options["A100-dra"]


def test_a_notebook_of_a_dra_type_claims_a_device_and_the_quota_bounds_a_second(
    hub: Hub, kube: ControlPlane, driver: str
) -> None:
    session = hub.login("alice")
    assert choice(hub.spawn_page(session, "alice")) == f"A100-dra: DRA device ({driver}), 2 of 2 free"

    pod = spawn_one_device(hub, kube, session, "alice")
    pods = "/api/v1/namespaces/user-alice/pods"
    assert pod["spec"]["nodeName"] == NODE  # the node whose driver published the devices
    [claimed] = pod["spec"]["resourceClaims"]
    template = claimed["resourceClaimTemplateName"]
    notebook = next(c for c in pod["spec"]["containers"] if c["name"] == "notebook")
    assert notebook["resources"]["claims"] == [{"name": claimed["name"]}]
    assert not any("gpu" in k for k in notebook["resources"].get("limits", {}))  # no extended resource
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    claims = "/apis/resource.k8s.io/v1/namespaces/user-alice/resourceclaims"
    claim = kube.request("GET", f"{claims}/{claim_name}")
    assert [o["kind"] for o in claim["metadata"]["ownerReferences"]] == ["Pod"]  # goes with the server
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"]) == (driver, NODE)
    templates = "/apis/resource.k8s.io/v1/namespaces/user-alice/resourceclaimtemplates"
    assert template in [t["metadata"]["name"] for t in listed(kube, templates)]

    until(  # the hub's watch saw the device allocated
        lambda: "1 of 2 free" in choice(hub.spawn_page(session, "alice", "second")),
        "the form counting the allocated device",
    )
    hub.spawn_refused(
        session,
        "alice",
        {"gpus": "1(A100-dra)"},
        "exceeded quota: kubelab-quota",
        f"{driver}.deviceclass.resource.k8s.io/devices",
        server="second",
    )
    assert [p["metadata"]["name"] for p in listed(kube, pods)] == [pod["metadata"]["name"]]

    assert hub.api("DELETE", "users/alice/server").status_code in (202, 204)
    hub.wait_server("alice", ready=False)
    until(lambda: not listed(kube, claims), "the server's claim deleted with its pod")


def test_a_dra_servers_device_is_its_users_gpu_hours_and_forged_claims_or_labels_move_none(
    hub: Hub, kube: ControlPlane, driver: str
) -> None:
    session = hub.login("bob")
    pod = spawn_one_device(hub, kube, session, "bob")
    pods = "/api/v1/namespaces/user-bob/pods"
    namespace = kube.request("GET", "/api/v1/namespaces/user-bob")["metadata"]
    written = (namespace.get("annotations") or {}).get("kubelab.io/group", "")
    group = group_label(written) if written else ""
    mine = (("gpu_type", "A100-dra"), ("group", group), ("user", "bob"))
    allocated, hours = (
        ("jupyterhub_kubelab_gpus_allocated", mine),
        ("jupyterhub_kubelab_gpu_hours_total", mine),
    )
    samples = hub_samples(hub, lambda s: s.get(allocated) == 1 and s.get(hours, 0) > 0)
    assert samples.get(allocated) == 1 and samples.get(hours, 0) > 0, (samples, hub.log_tail())
    assert samples[("jupyterhub_kubelab_gpus_total", (("gpu_type", "A100-dra"),))] == 2

    # What bob's side can say moves nothing: his pod's labels name carol, and a claim labelled
    # carol's, outside any user namespace (where labels are all kubelab has), holds the other
    # device reserved for his pod, which never references it (its status written as the driver
    # and scheduler would, by the admin: the strongest forgery; his own namespace's quota leaves
    # him no second device).
    forged = {"kubelab.io/user": "carol", "kubelab.io/group": "vision"}
    name = pod["metadata"]["name"]
    kube.request("PATCH", f"{pods}/{name}", {"metadata": {"labels": forged}}, "application/merge-patch+json")
    kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": "lab-shared"}})
    claims = "/apis/resource.k8s.io/v1/namespaces/lab-shared/resourceclaims"
    request = {"name": "gpus", "exactly": {"deviceClassName": driver}}
    claim = kube.request(
        "POST",
        claims,
        {"metadata": {"name": "forged", "labels": forged}, "spec": {"devices": {"requests": [request]}}},
    )
    everywhere = "/apis/resource.k8s.io/v1/resourceclaims"
    taken = {r["device"] for c in listed(kube, everywhere) for r in _results(c)}
    [other] = [d for d in ("gpu-0", "gpu-1") if d not in taken]
    result = {"request": "gpus", "driver": driver, "pool": NODE, "device": other}
    claim["status"] = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod["metadata"]["uid"]}],
    }
    kube.request("PUT", f"{claims}/forged/status", claim)
    until(  # the hub's watch saw the forged claim allocated
        lambda: "0 of 2 free" in choice(hub.spawn_page(session, "bob", "second")),
        "the form counting the forged claim's device",
    )
    before = hub_samples(hub, lambda s: True)[hours]
    samples = hub_samples(hub, lambda s: s.get(hours, 0) > before)
    assert samples[allocated] == 1 and samples[hours] > before, samples
    moved = [key for key in samples if ("user", "carol") in key[1] or ("group", "vision") in key[1]]
    assert moved == [], moved

    assert hub.api("DELETE", "users/bob/server").status_code in (202, 204)
    hub.wait_server("bob", ready=False)
    kube.request("DELETE", f"{claims}/forged")
    samples = hub_samples(hub, lambda s: allocated not in s)
    assert allocated not in samples, samples  # nothing held once the server's pod is gone


def _results(claim: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results: list[dict[str, Any]] = (allocation.get("devices") or {}).get("results") or []
    return results
