"""A spec's GPUs as the cluster exposes them: MIG profiles, time-sliced replicas, whole GPUs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kubelab.backends.kubernetes import builders, names
from kubelab.backends.kubernetes.cronjob import notebook_environ
from kubelab.backends.kubernetes.gpu_request import SharedType, parse_types, types_json
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.spec import ExperimentSpec

TYPES = [
    SharedType("A100", "A100", "nvidia.com/gpu", "exclusive"),
    SharedType("A100-1g.10gb", "A100-1g.10gb", "nvidia.com/mig-1g.10gb", "mig"),
    SharedType("A100-shared", "A100-SHARED", "nvidia.com/gpu", "time-slicing"),
]
NB = NotebookEnv(
    namespace="alice", image="registry.example.org/lab/notebook:1", node_selector={"lab/project": "vision"}
)
SHARED_NB = replace(NB, gpu_types=TYPES)


def target(spec: ExperimentSpec) -> builders.Target:
    owner = names.owner_hash("alice", "/mnt/alice/.kubelab/runs")
    name = names.job_name(spec.display_name, "0123456789ab", owner)
    return builders.Target("0123456789ab", "/mnt/alice/.kubelab/runs/0123456789ab", name, "alice", "alice")


def worker(resources: dict[str, Any], nb: NotebookEnv = SHARED_NB) -> dict[str, Any]:
    spec = ExperimentSpec.parse({"command": ["x"], "image": "python:3.11", "resources": resources})
    job = next(o for o in builders.build(spec, target(spec), nb) if o["kind"] == "Job")
    pod: dict[str, Any] = job["spec"]["template"]["spec"]
    return pod


def test_a_mig_profile_is_its_own_resource_and_no_node_label() -> None:
    pod = worker({"gpus": 2, "gpu_type": "a100-1g.10gb"})
    limits = pod["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-1g.10gb"] == "2" and "nvidia.com/gpu" not in limits
    assert pod["containers"][0]["resources"]["requests"]["nvidia.com/mig-1g.10gb"] == "2"
    assert pod["nodeSelector"] == {"lab/project": "vision"}  # the resource finds the nodes


def test_a_share_of_a_gpu_is_one_time_sliced_replica_on_the_shared_nodes() -> None:
    pod = worker({"gpus": 0.5})
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["nodeSelector"] == {"lab/project": "vision", "gpu-type": "A100-SHARED"}


def test_a_whole_gpu_of_a_listed_type_keeps_its_label() -> None:
    pod = worker({"gpus": 1, "gpu_type": "A100"})
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod["nodeSelector"]["gpu-type"] == "A100"


@pytest.mark.parametrize(
    ("resources", "nb", "where"),
    [
        ({"gpus": 0.5}, NB, "this cluster has none"),
        ({"gpus": 0.5, "gpu_type": "A100"}, SHARED_NB, "GPU type A100 has none"),
        ({"gpus": 0.5, "gpu_type": "A100-1g.10gb"}, SHARED_NB, "GPU type A100-1g.10gb has none"),
    ],
)
def test_a_share_without_a_time_sliced_type_is_refused_by_field(
    resources: dict[str, Any], nb: NotebookEnv, where: str
) -> None:
    with pytest.raises(ValidationError) as err:
        worker(resources, nb)
    [problem] = err.value.fields
    assert problem.path == "resources.gpus" and where in problem.reason and "MIG profile" in problem.reason


def test_the_catalog_travels_in_one_variable_and_bad_values_are_named() -> None:
    env = {"KUBELAB_NAMESPACE": "alice", "KUBELAB_GPU_TYPES": types_json(TYPES)}
    assert NotebookEnv.from_environ(env).gpu_types == TYPES
    # a schedule's fires submit as the notebook did: they carry the catalog on
    assert NotebookEnv.from_environ(notebook_environ(SHARED_NB)).gpu_types == TYPES
    assert parse_types(None) == []
    for text, reason in [
        ("{", "is not JSON"),
        ("{}", "must be a list"),
        ('[{"name": "x"}]', "string name, label_value"),
        ('[{"name": "x", "label_value": "x", "resource": "r", "sharing": "half"}]', "sharing must be one of"),
    ]:
        with pytest.raises(ValidationError) as err:
            NotebookEnv.from_environ({"KUBELAB_NAMESPACE": "alice", "KUBELAB_GPU_TYPES": text})
        [problem] = err.value.fields
        assert problem.path == "KUBELAB_GPU_TYPES" and reason in problem.reason
