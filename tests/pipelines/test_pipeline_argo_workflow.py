"""The pure builder of an `engine: argo` pipeline's Workflow (kubelab/pipelines/argo_workflow.py):
one DAG task per step, dependencies and retries from the spec, each task the schedule's pod
(kubelab/kube/cronjob.pod_spec) running `kubelab pipeline step ID STEP`."""

from __future__ import annotations

from typing import Any

import pytest

from kubelab.backends.kubernetes import cronjob
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.pipelines import argo_workflow

NB = NotebookEnv(
    namespace="u-alice",
    image="registry.example.org/lab/notebook:1",
    user="alice",
    home="/mnt/alice/.kubelab",
    node_selector={"lab/project": "vision"},
    tolerations=[{"key": "gpu", "operator": "Exists"}],
    volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "home-alice"}}],
    mounts=[{"name": "workspace", "mountPath": "/mnt/alice"}],
)
STEPS = [
    {"name": "prep", "experiment": {}, "depends_on": [], "retries": 0},
    {"name": "train_a", "experiment": {}, "depends_on": ["prep"], "retries": 2},
    {"name": "train_b", "experiment": {}, "depends_on": ["prep"], "retries": 0},
    {"name": "evaluate", "experiment": {}, "depends_on": ["train_a", "train_b"], "retries": 0},
]


def built() -> dict[str, Any]:
    objects = argo_workflow.build("0123456789ab", "nightly", STEPS, NB)
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Role", "RoleBinding", "Workflow"]
    return objects[-1]


def test_the_dag_has_one_task_per_step_with_its_dependencies() -> None:
    workflow = built()
    assert workflow["apiVersion"] == "argoproj.io/v1alpha1"
    assert workflow["metadata"] == {
        "name": "kubelab-pipeline-0123456789ab",
        "namespace": "u-alice",
        "labels": workflow["metadata"]["labels"],
        "annotations": {"kubelab.io/pipeline-name": "nightly"},
    }
    spec = workflow["spec"]
    assert spec["entrypoint"] == "pipeline"
    dag = spec["templates"][0]
    assert dag["name"] == "pipeline"
    assert dag["dag"]["tasks"] == [
        {"name": "step-prep", "template": "step-prep"},
        {"name": "step-train-a", "template": "step-train-a", "dependencies": ["step-prep"]},
        {"name": "step-train-b", "template": "step-train-b", "dependencies": ["step-prep"]},
        {
            "name": "step-evaluate",
            "template": "step-evaluate",
            "dependencies": ["step-train-a", "step-train-b"],
        },
    ]
    templates = {t["name"]: t for t in spec["templates"][1:]}
    assert templates["step-train-a"]["retryStrategy"] == {"limit": 2, "retryPolicy": "OnFailure"}
    assert "retryStrategy" not in templates["step-prep"]
    assert templates["step-train-a"]["metadata"]["labels"]["kubelab.io/pipeline-step"] == "train_a"


def test_each_task_is_the_schedules_pod_running_one_step() -> None:
    workflow = built()
    spec = workflow["spec"]
    pod = cronjob.pod_spec(NB, "main", [], argo_workflow.ACCOUNT)
    for template in spec["templates"][1:]:
        container = template["container"]
        step = template["metadata"]["labels"]["kubelab.io/pipeline-step"]
        assert container["command"] == ["kubelab", "pipeline", "step", "0123456789ab", step]
        assert {k: v for k, v in container.items() if k != "command"} == {
            k: v for k, v in pod["containers"][0].items() if k != "command"
        }
        assert container["image"] == NB.image
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["KUBELAB_BACKEND"] == "kubernetes" and env["KUBELAB_HOME"] == NB.home
    assert spec["serviceAccountName"] == "kubelab-pipelines"
    assert spec["securityContext"] == pod["securityContext"]
    assert spec["volumes"] == NB.volumes and spec["nodeSelector"] == NB.node_selector
    assert spec["tolerations"] == NB.tolerations
    task = argo_workflow.task_pod(workflow, "train_b")["spec"]
    assert task["containers"][0]["command"][-1] == "train_b" and task["volumes"] == NB.volumes


def test_the_account_holds_a_subset_of_the_notebooks_rights() -> None:
    account = argo_workflow.account(NB)
    role = account[1]
    assert role["rules"][:-1] == cronjob.RULES
    assert role["rules"][-1] == {
        "apiGroups": ["argoproj.io"],
        "resources": ["workflowtaskresults"],
        "verbs": ["create", "patch"],
    }
    assert account[2]["subjects"] == [
        {"kind": "ServiceAccount", "name": "kubelab-pipelines", "namespace": "u-alice"}
    ]


def test_a_notebook_without_image_or_home_is_refused_by_field() -> None:
    with pytest.raises(ValidationError) as refused:
        argo_workflow.build("0123456789ab", "x", STEPS, NotebookEnv(namespace="u", user="alice"))
    assert [f.path for f in refused.value.fields] == ["image", "KUBELAB_HOME"]
