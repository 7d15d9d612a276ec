"""MIG profiles on the real control plane: a KWOK node advertises `nvidia.com/mig-1g.10gb` as
the NVIDIA device plugin does under MIG's mixed strategy; a run of the catalog's MIG type is
built by the pure builders, the API server accepts its Job, the scheduler binds its pod to that
node by the resource alone, the hub's availability counts the slices it holds, and the
namespace's ResourceQuota (the spawner's, over every catalog resource) refuses a pod asking for
slices beyond the user's GPU quota. The spawn form offers each type in its units (whole GPUs,
MIG slices, time-sliced shares) with what the hub's availability watch counts of them."""

from __future__ import annotations

import asyncio
import html
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from kube_support import IMAGE, objects, wait_for
from kubernetes import client

from kubelab.backends.kubernetes import builders, names
from kubelab.backends.kubernetes.gpu_request import parse_types, types_json
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.spawner.availability import ClusterAvailability, TypeCount, cluster_availability
from kubelab.spawner.form import render_form
from kubelab.spawner.groups import Quota
from kubelab.spawner.objects import resource_quota
from kubelab.spawner.profiles import Catalog
from kubelab.spec import ExperimentSpec

MIG = "nvidia.com/mig-1g.10gb"


def test_a_run_of_a_mig_type_lands_on_the_node_advertising_it_and_is_counted(
    simulated_cluster: ControlPlane,
    make_node: Callable[..., str],
    admin: client.ApiClient,
    namespace: str,
) -> None:
    catalog = Catalog.parse({"gpu_types": [{"name": "A100"}, {"name": "A100-1g.10gb", "resource": MIG}]})
    mig_node = make_node("mig", cpu="16", extended={MIG: "7"})
    nb = NotebookEnv(namespace=namespace, image=IMAGE, gpu_types=parse_types(types_json(catalog.gpu_types)))
    spec = ExperimentSpec.parse(
        {
            "command": ["python", "train.py"],
            "resources": {"cpu": "1", "memory": "1Gi", "gpus": 2, "gpu_type": "A100-1g.10gb"},
        }
    )
    run_id = "0a1b2c3d4e5f"
    target = builders.Target(
        run_id,
        f"/runs/{run_id}",
        names.job_name(spec.display_name, run_id, names.owner_hash("ann", "/runs")),
        "ann",
        namespace,
    )
    core: Any = client.CoreV1Api(admin)  # the client's stubs take its models; it sends plain dicts too
    resources = [t.resource for t in catalog.gpu_types]
    core.create_namespaced_resource_quota(
        namespace, resource_quota(namespace, "kubelab-quota", Quota(gpus=2), resources)
    )
    batch: Any = client.BatchV1Api(admin)  # the client's stubs take its models; it sends plain dicts too
    for job in (o for o in builders.build(spec, target, nb) if o["kind"] == "Job"):
        batch.create_namespaced_job(namespace, job)

    def bound() -> dict[str, Any] | None:
        pods = objects(admin, "pods", namespace, f"kubelab.io/experiment={run_id}")
        return next((p for p in pods if p["spec"].get("nodeName")), None)

    pod = wait_for(bound, what="the run's pod bound to a node")
    assert pod["spec"]["nodeName"] == mig_node  # no label asked for it: the resource did
    assert pod["spec"]["containers"][0]["resources"]["limits"][MIG] == "2"

    nodes = client.ApiClient().sanitize_for_serialization(core.list_node().items)
    pods = client.ApiClient().sanitize_for_serialization(core.list_pod_for_all_namespaces().items)
    result = cluster_availability(nodes, pods, catalog)
    assert result.types["A100-1g.10gb"] == TypeCount(total=7, free=5)

    one_more = {
        "metadata": {"name": "one-more-slice"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": IMAGE,
                    "resources": {"limits": {MIG: "1", "cpu": "1", "memory": "1Gi"}},
                }
            ]
        },
    }
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(namespace, one_more)
    assert refused.value.status == 403 and "exceeded quota" in str(refused.value.body)


async def _until(check: Callable[[], object], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the availability watch did not catch up")
        await asyncio.sleep(0.05)


def holder(name: str, limits: dict[str, str], selector: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod holding GPUs of one kind (tolerating the GPU nodes' taint, as notebook pods do)."""
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": selector or {},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": IMAGE, "resources": {"limits": limits}}],
        },
    }


def test_the_spawn_form_offers_each_type_in_its_units_with_their_live_availability(
    simulated_cluster: ControlPlane,
    make_node: Callable[..., str],
    admin: client.ApiClient,
    namespace: str,
) -> None:
    from kubernetes_asyncio import client as async_client
    from kubernetes_asyncio import config

    tag = uuid.uuid4().hex[:6]  # label values of this test's own: the session's A100 nodes are not counted
    catalog = Catalog.parse(
        {
            "gpu_types": [
                {"name": "A100", "label_value": f"A100-{tag}"},
                {"name": "A100-1g.10gb", "resource": MIG},
                {"name": "A100-shared", "label_value": f"A100-SHARED-{tag}", "sharing": "time-slicing"},
            ]
        }
    )
    make_node("mig", extended={MIG: "7"})
    make_node("shared", gpus=16, gpu_type=f"A100-SHARED-{tag}")  # 4 GPUs offered as 4 replicas each
    core: Any = client.CoreV1Api(admin)  # the client's stubs take its models; it sends plain dicts too
    core.create_namespaced_pod(namespace, holder("two-slices", {MIG: "2"}))
    core.create_namespaced_pod(
        namespace, holder("a-share", {"nvidia.com/gpu": "1"}, {"gpu-type": f"A100-SHARED-{tag}"})
    )

    async def live() -> str:
        api_client = await config.new_client_from_config(str(simulated_cluster.kubeconfig))
        async with api_client:
            watch = ClusterAvailability(async_client.CoreV1Api(api_client), catalog)
            await watch.start()
            try:
                await _until(lambda: watch.current().types["A100-1g.10gb"] == TypeCount(total=7, free=5))
                await _until(lambda: watch.current().types["A100-shared"] == TypeCount(total=16, free=15))
                form: str = render_form(catalog, [], watch.current(), {"gpus": "1(A100-1g.10gb)"})
                return form
            finally:
                await watch.stop()

    form = asyncio.run(live())
    options = dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', form))
    assert options["A100"] == "A100: whole GPU, 0 of 0 free"
    assert options["A100-1g.10gb"] == f"A100-1g.10gb: MIG slice ({MIG}), 5 of 7 free"
    assert options["A100-shared"] == "A100-shared: time-sliced share (memory not isolated), 15 of 16 free"
    assert "cube-studio's '1(A100-1g.10gb)'" in html.unescape(form)  # the form's example: a MIG type
    assert 'name="gpus" value="1(A100-1g.10gb)"' in form  # the last choice kept
    rows = dict(re.findall(r'<tr data-gpu-type="([^"]+)">(.*?)</tr>', form))
    assert (
        rows["A100-1g.10gb"]
        == f'<td>A100-1g.10gb</td><td class="free">5</td><td class="total">7</td><td class="unit">MIG slice ({MIG})</td>'
    )
    assert '<td class="free">15</td><td class="total">16</td>' in rows["A100-shared"]
