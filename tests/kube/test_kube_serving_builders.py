"""Pure builders of served services: the built-in kinds pass the official schemas, the pods pass
`restricted`, and traffic a user asks for is checked against the versions that exist (each
refusal names its field). The cluster accepts them too: kube/test_kube_serving.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kubelab.backends.kubernetes import serving
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.serving_routes import (
    Gateway,
    Traffic,
    http_route,
    kserve_canary,
    parse_assignments,
    route_traffic,
    split,
)
from kubelab.errors import ValidationError
from kubelab.serving.spec import ServiceSpec

K8S_VERSION = kubernetes_validate.latest_version()
NB = NotebookEnv(
    namespace="alice",
    image="registry.example.org/lab/notebook:1",
    user="alice@example.org",
    node_selector={"lab/project": "vision"},
    volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "home-alice"}}],
    mounts=[{"name": "workspace", "mountPath": "/mnt/alice", "subPath": "alice"}],
)
TARGET = serving.ServiceTarget("alice", "alice@example.org", ["python", "serve.py"], gpu_metric="gpu_util")


def spec_of(**fields: Any) -> ServiceSpec:
    return ServiceSpec.parse({"name": "iris", "command": "python serve.py --port {{ port }}", **fields})


def fields_of(error: pytest.ExceptionInfo[ValidationError]) -> dict[str, str]:
    return {f.path: f.reason for f in error.value.fields}


def test_a_version_is_a_deployment_a_service_and_an_autoscaler_on_cpu_memory_and_gpu() -> None:
    spec = spec_of(version=2, replicas={"min": 1, "max": 5}, resources={"gpus": 1, "gpu_type": "T4"})
    objects = serving.version_objects(spec, TARGET, NB)
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    deployment, service, scaler = objects
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "iris-v2"
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == {"kubelab.io/service": "iris", "kubelab.io/service-version": "2"}
    metrics = {
        m.get("resource", m.get("pods", {}).get("metric", {})).get("name") for m in scaler["spec"]["metrics"]
    }
    assert metrics == {"cpu", "memory", "gpu_util"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"lab/project": "vision", "gpu-type": "T4"}
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(spec.resources.gpus)
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_an_internal_service_runs_its_command_with_its_port() -> None:
    spec = spec_of(ports=[8081], env={"PMA_HOST": "mysql"}, replicas=2)
    assert serving.argv(spec) == ["/bin/sh", "-c", "python serve.py --port 8081"]
    deployment, service = serving.version_objects(spec, TARGET, NB)  # fixed size: no autoscaler
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e["value"] for e in container["env"]}["PMA_HOST"] == "mysql"
    assert container["readinessProbe"]["tcpSocket"] == {"port": 8081}
    assert deployment["spec"]["replicas"] == 2 and service["spec"]["ports"][0]["port"] == 8081


def test_what_a_cluster_cannot_serve_is_named() -> None:
    with pytest.raises(ValidationError) as refusal:
        serving.version_objects(spec_of(replicas={"min": 0, "max": 2}, resources={"gpus": 0.5}), TARGET, NB)
    assert set(fields_of(refusal)) == {"replicas.min", "resources.gpus"}
    canary = serving.inference_service(spec_of(replicas={"min": 0, "max": 2}), TARGET, NB, canary=10)
    assert canary["spec"]["predictor"]["minReplicas"] == 0  # KServe scales to zero
    assert canary["metadata"]["labels"]["networking.kserve.io/visibility"] == "cluster-local"


def test_traffic_is_split_as_documented() -> None:
    assert split("iris", ["1", "2"], {"2": 10}) == Traffic({"1": 90, "2": 10})
    assert split("iris", ["1", "2", "3"], {"1": 50, "3": 20}) == Traffic({"1": 50, "2": 30, "3": 20})
    assert split("iris", ["1", "2"], {"1": 100}, {"2": 100}).mirror == {"2": 100}
    assert parse_assignments(["2=10", "v1=90"], "traffic") == {"2": 10, "1": 90}
    assert kserve_canary(split("iris", ["1", "2"], {"2": 10}), "1", "2") == 10


@pytest.mark.parametrize(
    "versions, weights, mirror, field",
    [
        (["1", "2"], {"3": 10}, None, "traffic.3"),  # no such version
        (["1", "2"], {"1": 60, "2": 60}, None, "traffic"),  # more than 100
        (["1", "2"], {"1": 50, "2": 40}, None, "traffic"),  # all named, not 100
        (["1", "2", "3"], {"2": 10}, None, "traffic"),  # two left without a weight
        (["1", "2"], {"2": 10}, {"4": 100}, "mirror.4"),
        (["1", "2"], {"2": 10}, {"2": 0}, "mirror.2"),
    ],
)
def test_bad_traffic_names_its_field(
    versions: list[str], weights: dict[str, int], mirror: dict[str, int] | None, field: str
) -> None:
    with pytest.raises(ValidationError) as refusal:
        split("iris", versions, weights, mirror)
    assert field in fields_of(refusal), refusal.value.fields


@pytest.mark.parametrize("item", ["2", "2=", "=10", "2=110", "2=ten", "2:10"])
def test_an_assignment_that_is_not_version_equals_percent_is_refused(item: str) -> None:
    with pytest.raises(ValidationError) as refusal:
        parse_assignments(["1=90", item], "traffic")
    assert "traffic[1]" in fields_of(refusal)


def test_a_rest_body_s_percents_are_whole_numbers_per_version() -> None:
    assert parse_assignments({"2": 10, "v1": 90}, "traffic") == {"2": 10, "1": 90}
    for percent in ("ten", "10", 10.5, True, -1, 101, None):
        with pytest.raises(ValidationError) as refusal:
            parse_assignments({"1": 90, "2": percent}, "traffic")
        assert [(f.path, str(percent) in f.reason) for f in refusal.value.fields] == [("traffic.2", True)]
    for shape in ("2=10", 10, None):
        with pytest.raises(ValidationError) as refusal:
            parse_assignments(shape, "mirror")  # type: ignore[arg-type]  # what a JSON body may hold
        assert list(fields_of(refusal)) == ["mirror"]


def test_kserve_cannot_mirror_or_serve_a_third_version() -> None:
    with pytest.raises(ValidationError) as refusal:
        kserve_canary(split("iris", ["1", "2"], {"2": 10}, {"2": 100}), "1", "2")
    assert "mirror" in fields_of(refusal)
    with pytest.raises(ValidationError) as refusal:
        kserve_canary(split("iris", ["1", "2", "3"], {"1": 10, "3": 90}), "2", "3")
    assert "traffic.1" in fields_of(refusal)


def test_a_route_on_the_labs_gateway_reads_back_as_its_split() -> None:
    traffic = split("iris", ["1", "2"], {"2": 25}, {"2": 50})
    route = http_route("iris", "alice", 8080, traffic, {}, Gateway.parse("gateways/shared"))
    assert route["spec"]["parentRefs"][1] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": "gateways",
        "name": "shared",
    }
    assert route_traffic(route, "iris") == traffic
    with pytest.raises(ValidationError) as refusal:
        Gateway.parse("shared")
    assert "KUBELAB_GATEWAY" in fields_of(refusal)


def recipes() -> list[dict[str, Any]]:
    """The `kind: service` files of docs/serving.md's recipes."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text.split("## Recipes", 1)[1], re.DOTALL)
    return [yaml.safe_load(block) for block in blocks]


def test_the_documented_recipes_build_restricted_internal_services() -> None:
    found = recipes()
    assert [r["name"] for r in found] == ["adminer", "mongo-express"]
    for recipe in found:
        spec = ServiceSpec.parse(recipe)
        assert not spec.serves_model
        target = serving.ServiceTarget("alice", "alice", serving.argv(spec))
        deployment, service = serving.version_objects(spec, target, NB)
        for obj in (deployment, service):
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["ports"] == [{"containerPort": recipe["ports"][0], "protocol": "TCP"}]
        if "{{ port }}" in " ".join(recipe["command"]):
            assert f":{recipe['ports'][0]}" in " ".join(container["command"])
        assert {e["name"] for e in container["env"]} >= set(recipe["env"])
        assert container["securityContext"]["runAsNonRoot"] is True
