"""Served services on the real control plane, with the notebook's own token: a version's
Deployment, Service and autoscaler in a namespace that enforces `restricted` Pod Security, its
pods running on KWOK's nodes; KServe's InferenceService and the Gateway API's HTTPRoute checked
against the schemas their projects publish (controlplane/crds.py installs them from the Go
modules cluster/addons pins, and removes them afterwards so other tests see a plain cluster).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.crds import GATEWAY_API, KSERVE, published_crds
from kube_support import IMAGE, wait_for
from kubernetes import client

from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.serving import (
    ServiceTarget,
    inference_service,
    service,
    version_objects,
)
from kubelab.backends.kubernetes.serving_routes import Traffic, http_route, route_traffic, split
from kubelab.serving.spec import ServiceSpec

pytestmark = pytest.mark.cluster


def spec_of(version: str = "1", **fields: Any) -> ServiceSpec:
    data: dict[str, Any] = {
        "name": "iris",
        "version": version,
        "command": ["python", "-m", "http.server", "{{ port }}"],
        "image": IMAGE,
        "resources": {"cpu": "500m", "memory": "256Mi"},
        "replicas": {"min": 2, "max": 4},
        **fields,
    }
    return ServiceSpec.parse(data)


@pytest.fixture
def kube(make_backend: Callable[..., KubernetesBackend]) -> KubernetesBackend:
    """The notebook's token (only notebook-role.yaml's rights) and settings."""
    return make_backend(start=False)


@pytest.fixture
def api(kube: KubernetesBackend) -> KubeApi:
    return kube.api


@pytest.fixture
def restricted(admin: client.ApiClient, namespace: str) -> str:
    """The namespace enforcing the `restricted` Pod Security level."""
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    client.CoreV1Api(admin).patch_namespace(namespace, {"metadata": {"labels": labels}})
    return namespace


@pytest.fixture
def addons(simulated_cluster: ControlPlane) -> Iterator[ControlPlane]:
    """KServe's and the Gateway API's published CRDs, for this test only."""
    crds = published_crds(KSERVE, *GATEWAY_API)
    for crd in crds:
        simulated_cluster.install_crd(crd, timeout=60)
    yield simulated_cluster
    for crd in crds:
        simulated_cluster.remove_crd(crd["metadata"]["name"], timeout=60)


def target(api: KubeApi) -> ServiceTarget:
    argv = ["python", "-m", "http.server", "8080"]
    return ServiceTarget(api.namespace, "alice", argv, run="run1", path="outputs/m")


def running_pods(admin: client.ApiClient, namespace: str, version: str) -> list[dict[str, Any]]:
    selector = f"kubelab.io/service=iris,kubelab.io/service-version={version}"
    pods = KubeApi(admin, namespace).list("Pod", selector)["items"]
    return [
        p
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def read(admin: client.ApiClient, namespace: str, kind: str, name: str) -> dict[str, Any]:
    found = KubeApi(admin, namespace).get(kind, name)
    assert found is not None, f"{kind} {name} is missing"
    return found


def test_a_version_runs_as_a_restricted_deployment_on_kwok_nodes(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    kube: KubernetesBackend,
    api: KubeApi,
    restricted: str,
) -> None:
    node = project_node(cpu="8", memory="32Gi")
    made = [api.apply(obj) for obj in version_objects(spec_of(), target(api), kube.nb)]
    assert [o["kind"] for o in made] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    pods = wait_for(lambda: len(p := running_pods(admin, restricted, "1")) == 2 and p, 60, "2 running pods")
    assert {p["spec"]["nodeName"] for p in pods} == {node}
    pod = pods[0]
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "kubelab-service"
    (svc,) = [o for o in made if o["kind"] == "Service"]
    assert svc["spec"]["type"] == "ClusterIP" and svc["metadata"]["name"] == "iris-v1"
    scaler = read(admin, restricted, "HorizontalPodAutoscaler", "iris-v1")
    assert (scaler["spec"]["minReplicas"], scaler["spec"]["maxReplicas"]) == (2, 4)
    assert sorted(m["resource"]["name"] for m in scaler["spec"]["metrics"]) == ["cpu", "memory"]
    # the controller took it on (it has no metrics server here to scale by)
    wait_for(
        lambda: (
            read(admin, restricted, "HorizontalPodAutoscaler", "iris-v1").get("status", {}).get("conditions")
        ),
        60,
        "the autoscaler's conditions",
    )


def test_a_fixed_size_service_gets_no_autoscaler_and_a_second_version_lives_beside_the_first(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    kube: KubernetesBackend,
    api: KubeApi,
    restricted: str,
) -> None:
    project_node(cpu="8", memory="32Gi")
    for version in ("1", "2"):
        for obj in version_objects(spec_of(version, replicas=1), target(api), kube.nb):
            api.apply(obj)
    api.apply(service(spec_of("2"), target(api), version="1"))  # the stable Service: version 1
    wait_for(lambda: running_pods(admin, restricted, "1") and running_pods(admin, restricted, "2"), 60)
    assert KubeApi(admin, restricted).list("HorizontalPodAutoscaler")["items"] == []
    stable = read(admin, restricted, "Service", "iris")
    assert stable["spec"]["selector"] == {"kubelab.io/service": "iris", "kubelab.io/service-version": "1"}


def test_kserve_takes_a_version_with_gpus_and_a_canary_for_the_next(
    addons: ControlPlane, kube: KubernetesBackend, api: KubeApi
) -> None:
    gpu = spec_of(
        resources={"cpu": "1", "memory": "2Gi", "gpus": 1, "gpu_type": "A100"}, replicas={"min": 0, "max": 3}
    )
    first = api.apply(inference_service(gpu, target(api), kube.nb))
    predictor = first["spec"]["predictor"]
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (0, 3)
    assert predictor["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert predictor["nodeSelector"]["gpu-type"] == "A100"
    assert first["metadata"]["labels"]["networking.kserve.io/visibility"] == "cluster-local"
    second = api.apply(inference_service(spec_of("2", replicas=1), target(api), kube.nb, canary=10))
    assert second["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert second["metadata"]["labels"]["kubelab.io/service-version"] == "2"
    # the published schema refuses what KServe does not know (strict field validation)
    wrong = inference_service(spec_of("3"), target(api), kube.nb)
    wrong["spec"]["predictor"]["canaryPercent"] = 5
    with pytest.raises(client.ApiException) as refusal:
        api.apply(wrong)
    assert "canaryPercent" in str(refusal.value.body)


def test_an_httproute_splits_and_mirrors_between_versions(addons: ControlPlane, api: KubeApi) -> None:
    labels = {"kubelab.io/service": "iris"}
    traffic = split("iris", ["1", "2"], {"2": 10}, {"2": 100})
    assert traffic == Traffic({"1": 90, "2": 10}, {"2": 100})
    route = api.apply(http_route("iris", api.namespace, 8080, traffic, labels))
    assert route_traffic(route, "iris") == traffic
    (rule,) = route["spec"]["rules"]
    assert [(b["name"], b["weight"]) for b in rule["backendRefs"]] == [("iris-v1", 90), ("iris-v2", 10)]
    assert route["spec"]["parentRefs"][0] == {"group": "", "kind": "Service", "name": "iris", "port": 8080}
    whole = api.apply(http_route("iris", api.namespace, 8080, split("iris", ["1", "2"], {"2": 100}), labels))
    assert route_traffic(whole, "iris") == Traffic({"1": 0, "2": 100})
