"""A DRA GPU type in the catalog, as pure builders: the claim template a run gets, its pods'
claims instead of a GPU limit, the quota key, and bad catalogs and specs refused by name."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kubelab.backends.kubernetes import builders, dra, names
from kubelab.backends.kubernetes.gpu_request import SharedType, parse_types, types_json
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.spawner.form import unit
from kubelab.spawner.groups import Quota
from kubelab.spawner.objects import resource_quota
from kubelab.spawner.profiles import Catalog, validate_options
from kubelab.spec import ExperimentSpec

CLASS = "gpu.example.com"
A100 = f'device.attributes["{CLASS}"].model == "A100"'
CATALOG = Catalog.parse(
    {"gpu_types": [{"name": "A100"}, {"name": "A100-dra", "device_class": CLASS, "selector": A100}]}
)
NB = NotebookEnv(namespace="alice", image="lab/nb:1", gpu_types=parse_types(types_json(CATALOG.gpu_types)))


def built(resources: dict[str, Any], **spec: Any) -> list[dict[str, Any]]:
    parsed = ExperimentSpec.parse({"command": ["x"], "resources": resources, **spec})
    name = names.job_name(parsed.display_name, "0123456789ab", names.owner_hash("alice", "/runs"))
    return builders.build(
        parsed, builders.Target("0123456789ab", "/runs/0123456789ab", name, "alice", "alice"), NB
    )


def test_a_dra_type_gets_a_claim_template_and_its_pods_claim_from_it() -> None:
    job, template = built({"gpus": 2, "gpu_type": "A100-dra", "cpu": "1"})
    assert (
        template["kind"] == "ResourceClaimTemplate"
        and template["metadata"]["name"] == job["metadata"]["name"]
    )
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {
        "deviceClassName": CLASS,
        "allocationMode": "ExactCount",
        "count": 2,
        "selectors": [{"cel": {"expression": A100}}],
    }
    pod = job["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": job["metadata"]["name"]}]
    [container] = pod["containers"]
    assert container["resources"]["claims"] == [{"name": "gpus"}]
    assert container["resources"]["limits"] == {"cpu": "1"}  # no extended resource, no node label
    assert "gpu-type" not in pod.get("nodeSelector", {})
    created = [dict(job, metadata={**job["metadata"], "uid": "u-1"})]
    owner = dra.owned(template, created)["metadata"]["ownerReferences"]
    assert owner == [{"apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"], "uid": "u-1"}]
    assert dra.owned(job, created) is job


def test_parameter_servers_claim_nothing_and_whole_gpu_types_are_unchanged() -> None:
    objects = built(
        {"gpus": 1, "gpu_type": "A100-dra"}, replicas=2, parameter_servers=1, framework="tensorflow"
    )
    ps = next(o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].endswith("-ps"))
    assert "resourceClaims" not in ps["spec"]["template"]["spec"]
    assert [o["kind"] for o in built({"gpus": 1, "gpu_type": "A100"})] == ["Job"]


def test_a_share_of_a_dra_type_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError) as refused:
        built({"gpus": 0.5, "gpu_type": "A100-dra"})
    [problem] = refused.value.fields
    assert problem.path == "resources.gpus" and "DeviceClass gpu.example.com" in problem.reason


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ({"name": "x", "sharing": "dra"}, "catalog.gpu_types[0].device_class"),
        ({"name": "x", "device_class": "Not A Name!"}, "catalog.gpu_types[0].device_class"),
        ({"name": "x", "device_class": CLASS, "sharing": "mig"}, "catalog.gpu_types[0].device_class"),
        ({"name": "x", "selector": "true"}, "catalog.gpu_types[0].selector"),
        ({"name": "x", "device_class": CLASS, "selector": 3}, "catalog.gpu_types[0].selector"),
    ],
)
def test_a_bad_dra_type_is_refused_by_field(entry: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Catalog.parse({"gpu_types": [entry]})
    assert [f.path for f in refused.value.fields] == [path]


def test_the_notebook_variable_carries_the_class_and_refuses_a_dra_type_without_one() -> None:
    assert [(t.device_class, t.selector) for t in NB.gpu_types] == [("", ""), (CLASS, A100)]
    with pytest.raises(ValueError, match=r"KUBELAB_GPU_TYPES\[0\].device_class is required"):
        parse_types(types_json([replace(SharedType("x", "x", "r"), sharing="dra")]))


def test_the_quota_bounds_the_class_devices_and_a_notebook_cannot_pick_the_type() -> None:
    quota = resource_quota("alice", "q", Quota(gpus=4), [t.resource for t in CATALOG.gpu_types])
    assert quota is not None
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "4",
        f"{CLASS}.deviceclass.resource.k8s.io/devices": "4",
    }
    assert unit(CATALOG.gpu_types[1]) == f"DRA device ({CLASS}), for runs"
    with pytest.raises(ValidationError) as refused:
        validate_options({"gpus": 1, "gpu_type": "A100-dra"}, CATALOG)
    assert [f.path for f in refused.value.fields] == ["gpu_type"]
