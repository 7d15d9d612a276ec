"""The catalog's shared and partitioned GPU types: MIG profiles and time-sliced replicas, as the
NVIDIA device plugin advertises them, in the spawn form, the notebook pod and the availability."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.spawner.availability import TypeCount, cluster_availability
from kubelab.spawner.groups import ProjectGroup
from kubelab.spawner.metrics import gpus_allocated
from kubelab.spawner.objects import Storage
from kubelab.spawner.pod_settings import pod_settings
from kubelab.spawner.profiles import Catalog, validate_options

MIG = "nvidia.com/mig-1g.10gb"
CATALOG = Catalog.parse(
    {
        "images": ["lab/pytorch:2"],
        "gpu_types": [
            {"name": "A100"},
            {"name": "A100-1g.10gb", "resource": MIG},
            {"name": "A100-shared", "label_value": "A100-SHARED", "sharing": "time-slicing"},
        ],
    }
)


def test_a_mig_resource_is_a_mig_type_and_sharing_is_checked() -> None:
    assert [t.sharing for t in CATALOG.gpu_types] == ["exclusive", "mig", "time-slicing"]
    with pytest.raises(ValidationError) as err:
        Catalog.parse({"gpu_types": [{"name": "A100", "sharing": "halves"}]})
    [problem] = err.value.fields
    assert problem.path == "catalog.gpu_types[0].sharing" and "time-slicing" in problem.reason


def test_a_notebook_of_a_mig_type_asks_for_the_profile_and_tells_its_runs_the_catalog() -> None:
    options = validate_options({"gpus": "1(A100-1g.10gb)"}, CATALOG)
    settings = pod_settings("ann", "ann", "ns", options, ProjectGroup("public"), CATALOG, Storage(), "nb")
    assert settings.gpu_limits == {MIG: 1}
    assert "gpu-type" not in settings.node_selector  # the profile's resource finds its nodes
    runs = NotebookEnv.from_environ(settings.env)  # what a run submitted from the notebook reads
    assert [(t.name, t.resource, t.sharing) for t in runs.gpu_types] == [
        (t.name, t.resource, t.sharing) for t in CATALOG.gpu_types
    ]
    shared = validate_options({"gpus": 1, "gpu_type": "a100-shared"}, CATALOG)
    settings = pod_settings("ann", "ann", "ns", shared, ProjectGroup("public"), CATALOG, Storage(), "nb")
    assert (
        settings.gpu_limits == {"nvidia.com/gpu": 1} and settings.node_selector["gpu-type"] == "A100-SHARED"
    )
    assert json.loads(settings.env["KUBELAB_GPU_TYPES"])[2]["sharing"] == "time-slicing"


def test_a_notebook_asks_for_a_share_of_a_time_sliced_type_only() -> None:
    """`gpus: 0.5` in the form: one replica of the time-sliced type (the asked one, else the
    catalog's first), told its share as a run is; a type that is not shared is refused by name."""
    for raw in ({"gpus": "0.5"}, {"gpus": "0.25(A100-shared)"}):
        options = validate_options(raw, CATALOG)
        assert options.gpu_type == "A100-shared" and options.units == 1
        settings = pod_settings("ann", "ann", "ns", options, ProjectGroup("public"), CATALOG, Storage(), "nb")
        assert settings.gpu_limits == {"nvidia.com/gpu": 1}
        assert settings.node_selector["gpu-type"] == "A100-SHARED"
        assert settings.env["KUBELAB_GPU_FRACTION"] == str(options.gpus)
    whole = validate_options({"gpus": 1, "gpu_type": "A100"}, CATALOG)
    settings = pod_settings("ann", "ann", "ns", whole, ProjectGroup("public"), CATALOG, Storage(), "nb")
    assert "KUBELAB_GPU_FRACTION" not in settings.env
    for raw, reason in (
        ({"gpus": "0.5(A100)"}, "gpus: a share of a GPU (0.5) needs a time-sliced GPU type, and A100 is not"),
        ({"gpus": "0.5(A100-1g.10gb)"}, "A100-1g.10gb is not (sharing: mig)"),
        ({"gpus": "0.3(A100-shared)"}, "gpus: must be a whole number of GPUs, or 1/n of one GPU"),
    ):
        with pytest.raises(ValidationError) as refused:
            validate_options(raw, CATALOG)
        assert [f.path for f in refused.value.fields] == ["gpus"]
        assert reason in str(refused.value.fields[0])
    with pytest.raises(ValidationError, match="needs a time-sliced GPU type, and this hub has none"):
        validate_options({"gpus": "0.5"}, Catalog.parse({"gpu_types": [{"name": "T4"}]}))


def node(name: str, label: str | None, allocatable: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"gpu-type": label} if label else {}},
        "status": {"allocatable": allocatable},
    }


def pod(name: str, resource: str, count: int, node_name: str | None = None) -> dict[str, Any]:
    amounts = {resource: str(count)}
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"limits": amounts}}]},
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def test_availability_counts_mig_slices_and_time_sliced_replicas() -> None:
    nodes = [
        node("mig-a", None, {MIG: "7"}),  # found by its resource, whatever its labels
        node("mixed", "A100", {"nvidia.com/gpu": "2", MIG: "3"}),  # MIG's mixed strategy
        node("shared", "A100-SHARED", {"nvidia.com/gpu": "16"}),  # 4 GPUs, 4 replicas each
    ]
    pods = [
        pod("on-mig", MIG, 2, "mig-a"),
        pod("on-mixed-mig", MIG, 1, "mixed"),
        pod("on-mixed-whole", "nvidia.com/gpu", 1, "mixed"),
        pod("waiting-for-a-slice", MIG, 1),
        pod("a-share", "nvidia.com/gpu", 1, "shared"),
    ]
    result = cluster_availability(nodes, pods, CATALOG)
    assert result.types["A100-1g.10gb"] == TypeCount(total=10, free=6)
    assert result.types["A100"] == TypeCount(total=2, free=1)
    assert result.types["A100-shared"] == TypeCount(total=16, free=15)
    assert result.unattributed == 0
    # the hub's series count the same slices, by type, for pods bound to a node
    assert gpus_allocated(nodes, pods, CATALOG) == {
        ("A100-1g.10gb", "", ""): 3,
        ("A100", "", ""): 1,
        ("A100-shared", "", ""): 1,
    }
