"""Pure Kubernetes builders: a user's spec cannot undo the group's placement or see GPUs it
did not ask for."""

from __future__ import annotations

from typing import Any

import pytest

from kubelab.backends.kubernetes import builders
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.spec import ExperimentSpec

NB = NotebookEnv(
    namespace="alice",
    image="registry.example.org/lab/notebook:1",
    user="alice",
    node_selector={"lab/project": "vision"},
)
TARGET = builders.Target(run_id="r1", name="kubelab-r1", run_dir="/mnt/alice/.kubelab/runs/r1", user="alice")


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    objects = builders.build(ExperimentSpec.parse(spec), TARGET, NB)
    job = next(o for o in objects if o["kind"] == "Job")
    pod_spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return pod_spec


def env_of(pod_spec: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod_spec["containers"][0]["env"]}


def test_a_spec_cannot_replace_the_groups_node_selector() -> None:
    with pytest.raises(ValidationError) as refused:
        pod({"command": "true", "node_selector": {"lab/project": "secret-gpus"}})
    assert any(f.path == "node_selector.lab/project" and "vision" in f.reason for f in refused.value.fields)
    placed = pod({"command": "true", "node_selector": {"zone": "a"}})
    assert placed["nodeSelector"] == {"zone": "a", "lab/project": "vision"}


def test_an_experiment_without_gpus_sees_none_even_on_a_gpu_node() -> None:
    assert env_of(pod({"command": "true"}))["NVIDIA_VISIBLE_DEVICES"] == "none"
    assert "NVIDIA_VISIBLE_DEVICES" not in env_of(pod({"command": "true", "resources": {"gpus": 1}}))


def test_a_spec_cannot_choose_its_visible_gpus() -> None:
    with pytest.raises(ValidationError) as refused:
        pod({"command": "true", "env": {"NVIDIA_VISIBLE_DEVICES": "all"}})
    assert any(f.path == "env.NVIDIA_VISIBLE_DEVICES" for f in refused.value.fields)


def test_gpus_without_a_type_still_meet_every_types_limit() -> None:
    from kubelab.spawner.profiles import Catalog, validate_options

    catalog = Catalog.parse(
        {"gpu_types": [{"name": "T4", "max_per_user": 2}, {"name": "V100", "max_per_user": 4}]}
    )
    with pytest.raises(ValidationError) as refused:
        validate_options({"gpus": 16}, catalog)
    assert any(f.path == "gpus" and "at most 4 GPU(s) per user" in f.reason for f in refused.value.fields)
    assert validate_options({"gpus": 4}, catalog).gpus == 4


def test_user_namespaces_enforce_pod_security(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubelab.spawner.cli import render

    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    namespace = render("alice", [], {})[0]
    assert namespace["kind"] == "Namespace"
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"


def test_admission_counts_a_users_namespace_not_a_label_the_user_can_set() -> None:
    from decimal import Decimal

    from kubelab.spawner.admission import admit
    from kubelab.spawner.availability import USER_LABEL, cluster_availability
    from kubelab.spawner.groups import ProjectGroup, Quota
    from kubelab.spawner.profiles import Catalog, NotebookOptions

    catalog = Catalog.parse({"gpu_types": [{"name": "T4", "max_per_user": 4}]})
    node = {
        "metadata": {"name": "n1", "labels": {"gpu-type": "T4"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    hidden = {
        "metadata": {"name": "job-1", "namespace": "user-alice", "labels": {USER_LABEL: "bob"}},
        "spec": {"nodeName": "n1", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Running"},
    }
    current = cluster_availability([node], [hidden], catalog)
    assert current.namespace("user-alice").gpus == 2
    group = ProjectGroup(name="public", user_quota=Quota(gpus=2))
    options = NotebookOptions(
        image="", cpu="1", memory="1Gi", gpus=1, gpu_type=None, group="public", profile=None
    )
    with pytest.raises(ValidationError, match="this server cannot start now"):
        admit(options, group, "alice", current, held=current.namespace("user-alice"))
    assert Decimal(0) == current.namespace("user-bob").cpu


def test_a_pod_labelled_as_another_user_and_group_counts_against_its_namespace_only() -> None:
    """Issue 27, finding 9: a Job's pods in Alice's namespace labelled as Bob's in group vision
    count against Alice and her namespace's group, in admission and in the hub's metrics."""
    from kubelab.spawner.admission import admit
    from kubelab.spawner.availability import GROUP_LABEL, USER_LABEL, cluster_availability
    from kubelab.spawner.groups import ProjectGroup, Quota
    from kubelab.spawner.metrics import experiments, gpus_allocated
    from kubelab.spawner.profiles import Catalog, NotebookOptions

    catalog = Catalog.parse({"gpu_types": [{"name": "T4", "max_per_user": 4}]})
    node = {
        "metadata": {"name": "n1", "labels": {"gpu-type": "T4"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}},
    }
    alice = {
        "metadata": {
            "name": "user-alice",
            "labels": {"app.kubernetes.io/managed-by": "kubelab", USER_LABEL: "alice"},
            "annotations": {GROUP_LABEL: "public"},
        }
    }
    forged = {
        "metadata": {
            "name": "job-1",
            "namespace": "user-alice",
            "labels": {
                USER_LABEL: "bob",
                GROUP_LABEL: "vision",
                "app.kubernetes.io/name": "kubelab-experiment",
                "kubelab.io/experiment": "r1",
            },
        },
        "spec": {"nodeName": "n1", "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
        "status": {"phase": "Running"},
    }
    current = cluster_availability([node], [forged], catalog, [alice])
    assert (current.user("alice").gpus, current.group("public").gpus) == (2, 2)
    assert (current.user("bob").gpus, current.group("vision").gpus) == (0, 0)
    vision = ProjectGroup(name="vision", user_quota=Quota(gpus=2), group_quota=Quota(gpus=2))
    options = NotebookOptions(
        image="", cpu="1", memory="1Gi", gpus=2, gpu_type=None, group="vision", profile=None
    )
    admit(options, vision, "bob", current)  # Bob and vision hold nothing: admitted
    assert gpus_allocated([node], [forged], catalog, [alice]) == {("T4", "public", "alice"): 2}
    assert experiments([forged], [alice]) == {("running", "alice"): 1}
    # outside a user namespace (trusted-lab mode's shared one) only the labels say whose it is
    assert gpus_allocated([node], [forged], catalog, []) == {("T4", "vision", "bob"): 2}
