"""On the real control plane, a notebook's own token tries to publish a served service beyond its
namespace, in a namespace prepared as a spawn prepares it (with `service_gateway` and
`service_domain` set) and the admission policies of `kubelab hub render --all` applied, with
KServe's and the Gateway API's published CRDs installed: a Service of another type than
ClusterIP or with `externalIPs` (created or patched), an HTTPRoute on another namespace's Service
or another Gateway, a route on the lab's Gateway for a hostname outside the namespace's, and an
InferenceService KServe would publish on its ingress. The API server refuses each; what kubelab
itself builds passes.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.crds import GATEWAY_API, KSERVE, published_crds
from controlplane.fixtures import RealCluster
from controlplane.objects import create_renamed, delete_namespaces
from kubernetes import client
from test_namespace_bounds import HUB, Lab, lab_config, refused, service, wait_for_policies, wait_for_quota

from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.serving import ServiceTarget, inference_service
from kubelab.backends.kubernetes.serving_routes import Gateway, http_route, split
from kubelab.serving.spec import ServiceSpec
from kubelab.spawner.bounds import NamespaceBounds
from kubelab.spawner.cli import render, render_all

pytestmark = pytest.mark.cluster
GATEWAY = "gateways/shared"
DOMAIN = "models.example.org"
POLICIES = ("kubelab-user-httproutes", "kubelab-user-inferenceservices")


@pytest.fixture(scope="module")
def lab(cluster: ControlPlane | RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not isinstance(cluster, ControlPlane):
        pytest.skip("installs CRDs on the loopback control plane")
    crds = published_crds(KSERVE, *GATEWAY_API)
    for crd in crds:
        cluster.install_crd(crd, timeout=60)
    folder = tmp_path_factory.mktemp("exposure")
    path = lab_config(folder)
    with path.open("a") as config:
        config.write(f"c.KubeLabSpawner.service_gateway = {GATEWAY!r}\n")
        config.write(f"c.KubeLabSpawner.service_domain = {DOMAIN!r}\n")
    admission = [o for o in render_all(path) if o["kind"].startswith("ValidatingAdmissionPolicy")]
    spawned = [o for o in render("alice", [], {}, path) if o["kind"] not in ("PersistentVolumeClaim", "Pod")]
    cluster_scoped = [o["metadata"]["name"] for o in admission]
    _, renamed = create_renamed(
        cluster.kubeconfig, [*admission, *spawned], ["user-alice", HUB, *cluster_scoped]
    )
    namespace = renamed["user-alice"]
    token = cluster.token_for(namespace, "kubelab-notebook")
    notebook = cluster.write_kubeconfig(folder / "notebook", token=token, namespace=namespace)
    lab = Lab(namespace, cluster.kubeconfig, notebook, renamed)
    try:
        wait_for_policies(lab)
        # the CRDs were installed just now: the quota counts their kinds once its controller finds them
        wait_for_quota(
            lab, ("count/inferenceservices.serving.kserve.io", "count/httproutes.gateway.networking.k8s.io")
        )
        yield lab
    finally:
        delete_namespaces(cluster.kubeconfig, namespace)
        with lab.api(admin=True) as api:
            admission_api = client.AdmissionregistrationV1Api(api)
            for name in cluster_scoped:
                if name.endswith(HUB):
                    admission_api.delete_validating_admission_policy_binding(renamed[name])
                else:
                    admission_api.delete_validating_admission_policy(renamed[name])
        for crd in crds:
            cluster.remove_crd(crd["metadata"]["name"], timeout=60)


def create(lab: Lab, obj: dict[str, Any], dry_run: bool = True) -> Any:
    """Create a served service's object with the notebook's token (dry run: nothing stays)."""
    group, version = obj["apiVersion"].split("/")
    plural = {"HTTPRoute": "httproutes", "InferenceService": "inferenceservices"}[obj["kind"]]
    with lab.api() as api:
        return client.CustomObjectsApi(api).create_namespaced_custom_object(
            group, version, lab.namespace, plural, obj, dry_run="All" if dry_run else None
        )


def route(
    lab: Lab, parents: list[dict[str, Any]] | None = None, hostnames: list[str] | None = None
) -> dict[str, Any]:
    """kubelab's route for versions 1 and 2 of `iris`, its parents and hostnames replaced."""
    built = http_route(
        "iris", lab.namespace, 8080, split("iris", ["1", "2"], {"2": 10}), {}, Gateway.parse(GATEWAY)
    )
    built["metadata"]["name"] = f"iris-{uuid.uuid4().hex[:4]}"
    if parents is not None:
        built["spec"]["parentRefs"] = parents
    if hostnames is not None:
        built["spec"]["hostnames"] = hostnames
    return built


def gateway(namespace: str, name: str) -> dict[str, Any]:
    return {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": namespace, "name": name}


def test_kubelabs_own_route_on_its_service_and_the_labs_gateway_passes(lab: Lab) -> None:
    create(lab, route(lab, hostnames=[f"iris.{lab.namespace}.{DOMAIN}"]), dry_run=False)
    create(lab, route(lab, parents=[{"group": "", "kind": "Service", "name": "iris"}]))


@pytest.mark.parametrize(
    "parents, hostnames, reason",
    [
        ([{"group": "", "kind": "Service", "name": "hub", "namespace": "jhub"}], None, "spec.parentRefs"),
        ([gateway("gateways", "internal")], ["iris.x.models.example.org"], "spec.parentRefs"),
        ([gateway("gateways", "shared")], ["hub.example.org"], "spec.hostnames"),
        ([gateway("gateways", "shared")], [], "spec.hostnames"),  # every hostname of the listener
        ([gateway("gateways", "shared")], ["iris.user-bob.models.example.org"], "spec.hostnames"),
    ],
)
def test_a_route_cannot_publish_beyond_the_namespace(
    lab: Lab, parents: list[dict[str, Any]], hostnames: list[str] | None, reason: str
) -> None:
    body = refused(lambda: create(lab, route(lab, parents, hostnames)))
    assert "ValidatingAdmissionPolicy" in body and reason in body, body


def test_an_inference_service_must_stay_cluster_local(lab: Lab) -> None:
    spec = ServiceSpec.parse({"name": "iris", "command": ["python", "serve.py"], "image": "lab/serve:1"})
    built = inference_service(
        spec, ServiceTarget(lab.namespace, "alice", ["python", "serve.py"]), NotebookEnv()
    )
    create(lab, built)  # kubelab's own passes
    del built["metadata"]["labels"]["networking.kserve.io/visibility"]
    body = refused(lambda: create(lab, built))
    assert "cluster-local" in body, body


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"spec": {"type": "NodePort"}}, "ClusterIP"),
        ({"spec": {"type": "LoadBalancer"}}, "ClusterIP"),
        ({"spec": {"externalIPs": ["203.0.113.9"]}}, "externalIPs"),
    ],
)
def test_a_services_service_cannot_be_patched_open(lab: Lab, change: dict[str, Any], reason: str) -> None:
    """The notebook may patch Services now (a stable Service's selector moves between versions):
    the policy checks updates as it checks creations."""
    name = f"iris-{uuid.uuid4().hex[:4]}"
    with lab.api() as api:
        KubeApi(api, lab.namespace).create({"apiVersion": "v1", "kind": "Service", **service(name, {})})
        core = client.CoreV1Api(api)
        body = refused(lambda: core.patch_namespaced_service(name, lab.namespace, change))
    assert reason in body, body


def test_the_serving_policies_type_check_against_the_published_schemas(lab: Lab) -> None:
    deadline = time.monotonic() + 30
    with lab.api(admin=True) as api:
        admission = client.AdmissionregistrationV1Api(api)
        for name in POLICIES:
            status = admission.read_validating_admission_policy(lab.renamed[name]).status
            while status is None or status.type_checking is None:
                assert time.monotonic() < deadline, f"{name} was never type-checked"
                time.sleep(0.2)
                status = admission.read_validating_admission_policy(lab.renamed[name]).status
            assert not status.type_checking.expression_warnings, status.type_checking.expression_warnings


def test_served_versions_stop_at_the_namespaces_count(lab: Lab) -> None:
    """Deployments count against the quota like Jobs (here with no replicas: no pod is made)."""
    template = {
        "metadata": {"labels": {"app": "flood"}},
        "spec": {"containers": [{"name": "c", "image": "lab/serve:1"}]},
    }
    made = 0
    with lab.api() as api:
        kube = KubeApi(api, lab.namespace)
        for i in range(NamespaceBounds().deployments + 1):
            body = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": f"flood-{i}"},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "flood"}}, "template": template},
            }
            try:
                kube.create(body)
                made += 1
            except client.ApiException as refusal:
                assert refusal.status == 403 and "exceeded quota" in str(refusal.body), refusal.body
                assert "count/deployments.apps=10" in str(refusal.body), refusal.body
                break
    assert made == NamespaceBounds().deployments
