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
from kubelab.spawner.dra_availability import DraCount, dra_counts
from kubelab.spawner.form import unit
from kubelab.spawner.groups import ProjectGroup, Quota
from kubelab.spawner.objects import Storage, resource_quota
from kubelab.spawner.pod_settings import pod_settings
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


def test_the_quota_bounds_the_class_devices_and_a_notebook_claims_from_a_template() -> None:
    quota = resource_quota("alice", "q", Quota(gpus=4), [t.resource for t in CATALOG.gpu_types])
    assert quota is not None
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "4",
        f"{CLASS}.deviceclass.resource.k8s.io/devices": "4",
    }
    assert unit(CATALOG.gpu_types[1]) == f"DRA device ({CLASS})"
    options = validate_options({"gpus": "2(A100-dra)"}, CATALOG)
    settings = pod_settings(
        "ann", "ann", "user-ann", options, ProjectGroup("public"), CATALOG, Storage(), "nb"
    )
    assert settings.gpu_limits == {} and "gpu-type" not in settings.node_selector  # claimed instead
    assert settings.env["KUBELAB_GPU_RESOURCE"] == "nvidia.com/gpu"  # runs' default stays a resource
    template = settings.dra_template
    assert template is not None and template["metadata"]["namespace"] == "user-ann"
    [request] = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"] == {
        "deviceClassName": CLASS,
        "allocationMode": "ExactCount",
        "count": 2,
        "selectors": [{"cel": {"expression": A100}}],
    }
    one = pod_settings(
        "ann",
        "ann",
        "user-ann",
        validate_options({"gpus": "1(A100-dra)"}, CATALOG),
        ProjectGroup("public"),
        CATALOG,
        Storage(),
        "nb",
    )
    assert one.dra_template and one.dra_template["metadata"]["name"] != template["metadata"]["name"]
    with pytest.raises(ValidationError) as refused:  # DRA claims whole devices
        validate_options({"gpus": 0.5, "gpu_type": "A100-dra"}, CATALOG)
    assert [f.path for f in refused.value.fields] == ["gpus"]


def slice_of(driver: str, pool: str, generation: int, models: list[str]) -> dict[str, Any]:
    devices = [{"name": f"g{i}", "attributes": {"model": {"string": m}}} for i, m in enumerate(models)]
    return {"spec": {"driver": driver, "pool": {"name": pool, "generation": generation}, "devices": devices}}


def test_free_devices_are_the_newest_slices_minus_allocated_claims_where_kubelab_can_tell() -> None:
    other = "other.example.com"
    slices = [
        slice_of(CLASS, "n1", 1, ["V100", "V100"]),  # replaced by the driver's generation 2
        slice_of(CLASS, "n1", 2, ["A100", "A100", "H100"]),
        slice_of(other, "n2", 1, ["A100"]),  # another driver's: not the class's
    ]
    claims = [
        {
            "status": {
                "allocation": {"devices": {"results": [{"driver": CLASS, "pool": "n1", "device": "g0"}]}}
            }
        }
    ]
    classes = {CLASS: [f'device.driver == "{CLASS}"']}
    attribute = f'device.attributes["{CLASS}"].model'
    types = [
        SharedType("A100-dra", "a", "r", "dra", CLASS, f'{attribute} == "A100"'),
        SharedType(
            "not-h100", "b", "r", "dra", CLASS, f'{attribute} != "H100" && device.driver == "{CLASS}"'
        ),
        SharedType("any", "c", "r", "dra", CLASS),
        SharedType("a-models", "d", "r", "dra", CLASS, f'{attribute}.startsWith("A")'),
        SharedType(
            "by-memory", "f", "r", "dra", CLASS, f'device.capacity["{CLASS}"].memory.isGreaterThan(1)'
        ),
        SharedType("gone", "e", "r", "dra", "missing.example.com"),
    ]
    counts = dra_counts(types, classes, slices, claims)
    assert counts == {
        "A100-dra": DraCount(2, 1),
        "not-h100": DraCount(2, 1),
        "any": DraCount(3, 2),
        "a-models": DraCount(2, 1),
        "by-memory": DraCount(3, None),  # not evaluated: the class's devices, free count unknown
        "gone": DraCount(0, 0),
    }
