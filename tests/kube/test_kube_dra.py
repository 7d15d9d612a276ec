"""GPUs claimed through Dynamic Resource Allocation on the real control plane (resource.k8s.io/v1).

The test plays the cluster admin (a DeviceClass) and the DRA driver (a ResourceSlice publishing
a KWOK node's devices); everything else is the real API server, resourceclaim controller,
garbage collector and kube-scheduler: a run of the catalog's DRA type gets a claim template,
its pod's claim is allocated devices of that node's slice and the pod is bound there; a run
asking more devices than exist stays Pending with the scheduler's reason in kubelab's status;
the namespace's quota on the class's devices refuses claims beyond it, whoever makes them."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.dra import GROUP, VERSION, publish_slice
from controlplane.dra import device_class as made_class
from kube_support import pods_of, wait_for
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio import config as async_config

from kubelab.backends.kubernetes import dra
from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.dra import quota_key
from kubelab.backends.kubernetes.gpu_request import DraRequest, SharedType
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.spawner.admission_policy import (
    HUB_LABEL,
    POLICIES,
    binding,
    namespace_annotations,
    placement,
    policy,
)
from kubelab.spawner.availability import Availability, ClusterAvailability, TypeCount
from kubelab.spawner.bounds import NamespaceBounds
from kubelab.spawner.form import render_form
from kubelab.spawner.groups import Quota
from kubelab.spawner.labels import MANAGED_BY
from kubelab.spawner.objects import resource_quota
from kubelab.spawner.profiles import Catalog


@pytest.fixture
def device_class(admin: client.ApiClient) -> Iterator[str]:
    with made_class(admin) as name:
        yield name


def dra_lab(make: Callable[..., KubernetesBackend], home: Path, device_class: str) -> Experiments:
    a100 = f'device.attributes["{device_class}"].model == "A100"'
    types = [SharedType("A100-dra", "A100-dra", quota_key(device_class), "dra", device_class, a100)]
    return Experiments(home=home, backend=make(gpu_types=types), user="alice")


def test_a_dra_run_gets_devices_of_the_nodes_slice_and_one_asking_too_many_waits(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    make_backend: Callable[..., KubernetesBackend],
    admin: client.ApiClient,
    device_class: str,
    namespace: str,
    home: Path,
) -> None:
    node = project_node("dra", cpu="16")
    other = project_node("dra")
    publish_slice(admin, device_class, other, ["H100", "H100"])  # the selector's model is not there
    devices = publish_slice(admin, device_class, node, ["A100", "A100", "H100"])
    lab = dra_lab(make_backend, home, device_class)
    resources = {"cpu": "1", "memory": "1Gi", "gpu_type": "A100-dra"}
    run_id = lab.submit(
        {"command": ["python", "t.py"], "resources": {**resources, "gpus": 2}}, base_dir=home
    )["id"]

    pod = wait_for(
        lambda: next((p for p in pods_of(admin, namespace, run_id) if p["spec"].get("nodeName")), None)
    )
    assert pod["spec"]["nodeName"] == node
    assert "nvidia.com/gpu" not in pod["spec"]["containers"][0]["resources"].get("limits", {})
    claim_name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    custom: Any = client.CustomObjectsApi(admin)
    claim = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim_name)
    results = claim["status"]["allocation"]["devices"]["results"]
    assert {(r["driver"], r["pool"]) for r in results} == {(device_class, node)}
    assert sorted(r["device"] for r in results) == devices[:2]  # the two A100s; the H100 is left

    templates = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaimtemplates")
    template = next(
        t for t in templates["items"] if t["metadata"]["labels"].get("kubelab.io/experiment") == run_id
    )
    assert [o["kind"] for o in template["metadata"]["ownerReferences"]] == ["Job"]  # goes with the run

    greedy = lab.submit({"command": ["python", "t.py"], "resources": {**resources, "gpus": 3}}, base_dir=home)
    waiting = wait_for(
        lambda: (
            (r := lab.get(greedy["id"]))["status"] == "Pending"
            and "cannot allocate all claims" in (r.get("reason") or "")
            and r
        ),
        what="the scheduler's reason for the run asking 3 A100s",
    )
    assert "0/" in waiting["reason"]  # the scheduler's own words: no node can allocate the claim

    lab.stop(run_id)
    wait_for(
        lambda: (
            not any(
                t["metadata"]["name"] == template["metadata"]["name"]
                for t in custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, "resourceclaimtemplates"
                )["items"]
            )
        ),
        what="the stopped run's claim template deleted with its Job",
    )


def test_the_quota_on_a_device_class_refuses_claims_beyond_it(
    admin: client.ApiClient, device_class: str, namespace: str
) -> None:
    catalog = Catalog.parse({"gpu_types": [{"name": "A100-dra", "device_class": device_class}]})
    quota = resource_quota(namespace, "kubelab-quota", Quota(gpus=1), [t.resource for t in catalog.gpu_types])
    assert quota is not None and quota["spec"]["hard"] == {quota_key(device_class): "1"}
    core: Any = client.CoreV1Api(admin)
    core.create_namespaced_resource_quota(namespace, quota)
    wait_for(
        lambda: (q := core.read_namespaced_resource_quota("kubelab-quota", namespace).status) and q.hard,
        what="the quota counted",
    )

    def claim(name: str) -> dict[str, Any]:
        request = {"name": "g", "exactly": {"deviceClassName": device_class}}
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": [request]}},
        }

    custom: Any = client.CustomObjectsApi(admin)
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim("first"))
    with pytest.raises(ApiException) as refused:  # the API server refuses whoever asks: the controller too
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", claim("second"))
    assert refused.value.status == 403 and "exceeded quota" in str(refused.value.body)
    assert quota_key(device_class) in str(refused.value.body)


def test_a_share_of_a_dra_type_and_a_dra_type_without_class_are_refused_by_name(
    make_backend: Callable[..., KubernetesBackend], home: Path
) -> None:
    lab = dra_lab(lambda **kw: make_backend(start=False, **kw), home, "gpu.example.com")
    with pytest.raises(ValidationError) as refused:
        lab.submit({"command": ["t"], "resources": {"gpus": 0.5, "gpu_type": "A100-dra"}}, base_dir=home)
    assert [f.path for f in refused.value.fields] == ["resources.gpus"]
    assert "DeviceClass gpu.example.com" in str(refused.value.fields[0])
    with pytest.raises(ValidationError) as bad:
        Catalog.parse({"gpu_types": [{"name": "x", "sharing": "dra"}]})
    assert [f.path for f in bad.value.fields] == ["catalog.gpu_types[0].device_class"]


def test_a_notebook_token_cannot_claim_a_device_class_outside_the_catalog(
    admin: client.ApiClient, device_class: str, namespace: str, notebook_kubeconfig: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    hub = f"hub-{suffix}"
    where = placement(hub, {}, [], [], device_classes=(device_class,))
    core: Any = client.CoreV1Api(admin)
    labels = {**MANAGED_BY, HUB_LABEL: hub}
    core.patch_namespace(
        namespace,
        {"metadata": {"labels": labels, "annotations": namespace_annotations(where, NamespaceBounds())}},
    )
    admission: Any = client.AdmissionregistrationV1Api(admin)
    made = []
    for kept in (p for p in POLICIES if p.resource.startswith("resourceclaim")):
        renamed = replace(kept, name=f"{kept.name}-{suffix}")
        admission.create_validating_admission_policy(policy(renamed))
        admission.create_validating_admission_policy_binding(binding(renamed, hub))
        made.append(renamed)
    try:
        with config.new_client_from_config(str(notebook_kubeconfig)) as api:
            custom: Any = client.CustomObjectsApi(api)

            def template(name: str, device_class: str) -> dict[str, Any]:
                return dra.claim_template(DraRequest(device_class, 1), name, {})

            def create(body: dict[str, Any], dry_run: str | None = None) -> Any:
                kw = {"dry_run": dry_run} if dry_run else {}
                return custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, "resourceclaimtemplates", body, **kw
                )

            def policy_applies() -> bool:  # the API server has compiled the policy and sees its binding
                try:
                    create(template("probe", "other.example.com"), dry_run="All")
                except ApiException as refused:
                    return "ValidatingAdmissionPolicy" in str(refused.body)
                return False

            wait_for(policy_applies, what="the claim policy applied to the namespace")
            with pytest.raises(ApiException) as refused:
                create(template("elsewhere", "other.example.com"))
            assert refused.value.status == 403
            assert f"only the DeviceClasses of the GPU catalog: {device_class}" in str(refused.value.body)
            assert create(template("allowed", device_class))["metadata"]["name"] == "allowed"
        # the claims the resourceclaim controller makes from a template are held to the same list
        claim: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceClaim"}
        claim.update(
            metadata={"name": "direct"}, spec=template("direct", "other.example.com")["spec"]["spec"]
        )
        claims: Any = client.CustomObjectsApi(admin)

        def claim_refusal() -> str | None:  # dry-run: admission runs, nothing is stored
            try:
                claims.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, "resourceclaims", claim, dry_run="All"
                )
            except ApiException as refused:
                return str(refused.body) if "ValidatingAdmissionPolicy" in str(refused.body) else None
            return None

        assert "only the DeviceClasses" in wait_for(claim_refusal, what="a claim outside the catalog refused")
    finally:
        for made_policy in made:
            admission.delete_validating_admission_policy_binding(f"{made_policy.name}-{hub}")
            admission.delete_validating_admission_policy(made_policy.name)


def test_the_hubs_watch_counts_a_dra_types_free_devices_from_slices_and_claims(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    make_backend: Callable[..., KubernetesBackend],
    admin: client.ApiClient,
    device_class: str,
    home: Path,
) -> None:
    """The spawn form's count: the class's devices in the drivers' slices that the type's
    selector accepts, minus those allocated to claims, from the hub's mirrors; a selector kubelab
    cannot evaluate (one reading a device's capacity) shows the class's devices and says the free
    count is unknown."""
    node = project_node("dra", cpu="16")
    publish_slice(admin, device_class, node, ["A100", "A100", "H100"])
    attribute = f'device.attributes["{device_class}"].model'
    catalog = Catalog.parse(
        {
            "gpu_types": [
                {"name": "A100-dra", "device_class": device_class, "selector": f'{attribute} == "A100"'},
                {"name": "any-dra", "device_class": device_class},
                {"name": "a-dra", "device_class": device_class, "selector": f'{attribute}.startsWith("A")'},
                {
                    "name": "odd-dra",
                    "device_class": device_class,
                    "selector": f'device.capacity["{device_class}"].memory.isGreaterThan(quantity("1Gi"))',
                },
            ]
        }
    )

    async def live(until: Callable[[Availability], bool]) -> tuple[Availability, str]:
        api_client = await async_config.new_client_from_config(str(simulated_cluster.kubeconfig))
        async with api_client:
            core, custom = async_client.CoreV1Api(api_client), async_client.CustomObjectsApi(api_client)
            watch = ClusterAvailability(core, catalog, custom)
            await watch.start()
            try:
                deadline = time.monotonic() + 60
                while not until(watch.current()):
                    assert time.monotonic() < deadline, watch.current().types
                    await asyncio.sleep(0.05)
                return watch.current(), render_form(catalog, [], watch.current())
            finally:
                await watch.stop()

    now, _ = asyncio.run(live(lambda a: a.types["any-dra"].total == 3))
    assert (now.types["A100-dra"], now.types["any-dra"]) == (TypeCount(2, 2), TypeCount(3, 3))
    assert now.types["a-dra"] == TypeCount(2, 2)  # CEL beyond `==` (startsWith), evaluated
    assert now.unknown == {"odd-dra"} and now.types["odd-dra"].total == 3  # capacity: not guessed

    lab = dra_lab(make_backend, home, device_class)  # a run claims one A100; the scheduler allocates it
    resources = {"cpu": "1", "memory": "1Gi", "gpu_type": "A100-dra", "gpus": 1}
    lab.submit({"command": ["python", "t.py"], "resources": resources}, base_dir=home)
    now, form = asyncio.run(live(lambda a: a.types["A100-dra"].free == 1))
    assert (now.types["A100-dra"], now.types["any-dra"]) == (TypeCount(2, 1), TypeCount(3, 2))
    assert now.types["a-dra"] == TypeCount(2, 1)
    options = dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', form))
    assert options["A100-dra"] == f"A100-dra: DRA device ({device_class}), 1 of 2 free"
    assert options["odd-dra"] == f"odd-dra: DRA device ({device_class}), 3 in its class, free count unknown"
    assert '<tr data-gpu-type="odd-dra"><td>odd-dra</td><td class="free">unknown</td>' in form
