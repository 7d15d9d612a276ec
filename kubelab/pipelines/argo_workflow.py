"""A pipeline as an Argo Workflow (`engine: argo`), as plain dicts (pure functions, no API calls).

The Workflow is a DAG with one task per step: `dependencies` from `depends_on`,
`retryStrategy.limit` from `retries`. Each task runs `kubelab pipeline step ID STEP` in the
notebook's image, in the same pod as a schedule's CronJob (`kubelab.backends.kubernetes.cronjob.pod_spec`:
the notebook's environment, volumes, node selector and tolerations, `restricted` Pod
Security), so a step runs exactly as the pipeline driver runs it (`kubelab.pipelines.step`):
its templates are filled from the records of the steps before it in the pipeline's folder on
the user's volume, its experiment or sweep is submitted as Jobs, followed, and recorded.
Argo only orders the tasks and retries them.

The pods run as one ServiceAccount per namespace, `kubelab-pipelines`, whose Role holds what
a step needs (the schedule's rights: Jobs, Services, reading pods, logs, events) and what
Argo's executor writes (`workflowtaskresults`), a subset of the notebook's Role.
"""

from __future__ import annotations

from typing import Any

from kubelab.backends.kubernetes import cronjob, names
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError

GROUP, VERSION, PLURAL = "argoproj.io", "v1alpha1", "workflows"
ACCOUNT = "kubelab-pipelines"
ENTRYPOINT = "pipeline"
RULES = [
    *cronjob.RULES,  # Argo's executor (v3.4+) reports each task's outputs as WorkflowTaskResults
    {"apiGroups": [GROUP], "resources": ["workflowtaskresults"], "verbs": ["create", "patch"]},
]
Manifest = dict[str, Any]


def workflow_name(pipeline_id: str) -> str:
    return f"kubelab-pipeline-{pipeline_id}"


def task_name(step: str) -> str:
    """Step names are `[A-Za-z_][A-Za-z0-9_]*`; Argo's task and template names take no `_`.
    Steps cannot contain `-`, so the mapping keeps distinct steps distinct."""
    return "step-" + step.replace("_", "-")


def build(pipeline_id: str, name: str, steps: list[dict[str, Any]], nb: NotebookEnv) -> list[Manifest]:
    """ServiceAccount, Role, RoleBinding and Workflow, in creation order.

    `steps` are the validated spec's steps (`PipelineSpec.to_dict()["steps"]`)."""
    problems = cronjob.notebook_problems(nb, "the pipeline")
    if problems:
        raise ValidationError("cannot submit this pipeline to Argo", problems)
    return [*account(nb), workflow(pipeline_id, name, steps, nb)]


def account(nb: NotebookEnv) -> list[Manifest]:
    """The namespace's pipeline account; the same objects for every pipeline (409 = already there)."""
    meta = {
        "name": ACCOUNT,
        "namespace": nb.namespace,
        "labels": {names.MANAGED_BY: names.MANAGER, "app.kubernetes.io/name": "kubelab-pipeline"},
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta,
            "automountServiceAccountToken": False,
        },
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": RULES},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": nb.namespace}],
        },
    ]


def workflow(pipeline_id: str, name: str, steps: list[dict[str, Any]], nb: NotebookEnv) -> Manifest:
    pod = cronjob.pod_spec(nb, "main", [], ACCOUNT)  # Argo's name for a template's container
    container = pod.pop("containers")[0]
    labels = {
        names.MANAGED_BY: names.MANAGER,
        names.USER: names.label_value(nb.user),
        "kubelab.io/pipeline": pipeline_id,
    }
    tasks, templates = [], []
    for step in steps:
        task: Manifest = {"name": task_name(step["name"]), "template": task_name(step["name"])}
        if step.get("depends_on"):
            task["dependencies"] = [task_name(d) for d in step["depends_on"]]
        tasks.append(task)
        template: Manifest = {
            "name": task_name(step["name"]),
            "metadata": {"labels": {**labels, "kubelab.io/pipeline-step": step["name"]}},
            "container": {**container, "command": ["kubelab", "pipeline", "step", pipeline_id, step["name"]]},
        }
        if step.get("retries"):
            template["retryStrategy"] = {"limit": step["retries"], "retryPolicy": "OnFailure"}
        templates.append(template)
    spec: Manifest = {
        "entrypoint": ENTRYPOINT,
        "templates": [{"name": ENTRYPOINT, "dag": {"tasks": tasks}}, *templates],
        "serviceAccountName": pod["serviceAccountName"],
        "automountServiceAccountToken": pod["automountServiceAccountToken"],
        "securityContext": pod["securityContext"],
        "podMetadata": {"labels": labels},
        "podSpecPatch": '{"enableServiceLinks": false}',
    }
    for key in ("volumes", "nodeSelector", "tolerations"):
        if key in pod:
            spec[key] = pod[key]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workflow",
        "metadata": {
            "name": workflow_name(pipeline_id),
            "namespace": nb.namespace,
            "labels": labels,
            "annotations": {"kubelab.io/pipeline-name": name},
        },
        "spec": spec,
    }


def task_pod(workflow: Manifest, step: str) -> Manifest:
    """The pod Argo makes for a step's task (without the executor's own containers): what the
    namespace's Pod Security admission judges. Tests create it where no Argo controller runs."""
    spec = workflow["spec"]
    template = next(t for t in spec["templates"] if t["name"] == task_name(step))
    pod: Manifest = {
        "restartPolicy": "Never",
        "serviceAccountName": spec["serviceAccountName"],
        "automountServiceAccountToken": spec["automountServiceAccountToken"],
        "enableServiceLinks": False,
        "securityContext": spec["securityContext"],
        "containers": [template["container"]],
    }
    for key in ("volumes", "nodeSelector", "tolerations"):
        if key in spec:
            pod[key] = spec[key]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{workflow['metadata']['name']}-{task_name(step)}"[:63].rstrip("-"),
            "labels": {**spec["podMetadata"]["labels"], **template["metadata"]["labels"]},
        },
        "spec": pod,
    }
