"""A schedule on Kubernetes, as plain dicts (pure functions, no API calls).

So a schedule fires while the user's notebook server is culled, it becomes a CronJob in the
user's namespace that runs the notebook's image with kubelab (`kubelab schedule fire ID`):
that command reads the schedule from `$KUBELAB_HOME` on the user's volume (mounted as in
the notebook), refuses to start outside `start`/`end` (a CronJob has no bounds), starts what
it describes with the Kubernetes backend (its steps are Jobs, as any experiment's) and
follows it to the end, so `concurrencyPolicy` sees a fire as running while its pipeline or
sweep runs. Each schedule's pod runs as its own ServiceAccount `kubelab-schedule-<id>`,
whose Role allows what that needs in its own namespace and nothing else (a subset of the
notebook's Role: the notebook binds it, and Kubernetes refuses to bind rights the binder
lacks). The pod passes the `restricted` Pod Security level.

`kubelab schedule render -f spec.yml` prints these objects.
"""

from __future__ import annotations

import json
from typing import Any

from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.gpu_request import types_json
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.pod_security import container_security, pod_security
from kubelab.errors import FieldError, ValidationError
from kubelab.schedules.spec import Schedule

ACCOUNT_PREFIX = "kubelab-schedule-"
CONCURRENCY_POLICY = {"forbid": "Forbid", "allow": "Allow", "replace": "Replace"}
STARTING_DEADLINE = 3600  # a fire missed by more than an hour (control plane down) is skipped
RULES = [  # what `kubelab schedule fire` calls: submit, follow and stop (replace) Jobs
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": ["create", "get", "delete"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["list", "watch"]},
]
Manifest = dict[str, Any]


def build(schedule_id: str, name: str, schedule: Schedule, paused: bool, nb: NotebookEnv) -> list[Manifest]:
    """ServiceAccount, Role, RoleBinding and CronJob, in creation order (delete in reverse)."""
    check(schedule, nb)
    namespace = nb.namespace
    account_name = account(schedule_id)
    meta = {"namespace": namespace, "labels": _labels(schedule_id, nb)}
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account_name, **meta},
        "automountServiceAccountToken": False,
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": account_name, **meta},
        "rules": RULES,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": account_name, **meta},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account_name},
        "subjects": [{"kind": "ServiceAccount", "name": account_name, "namespace": namespace}],
    }
    return [service_account, role, binding, cronjob(schedule_id, name, schedule, paused, nb)]


def account(schedule_id: str) -> str:
    """The schedule's own ServiceAccount, Role and RoleBinding name."""
    return ACCOUNT_PREFIX + schedule_id


def check(schedule: Schedule, nb: NotebookEnv) -> None:
    """What a CronJob cannot express, refused by field before anything is created."""
    problems = []
    if len(schedule.cron.split()) != 5:
        problems.append(
            FieldError(
                "schedule.cron",
                "a Kubernetes CronJob takes five fields (minute "
                "hour day-of-month month day-of-week); seconds and years run "
                "only on the local scheduler",
            )
        )
    problems += notebook_problems(nb, "the schedule")
    if problems:
        raise ValidationError("cannot schedule this on the cluster", problems)


def notebook_problems(nb: NotebookEnv, what: str) -> list[FieldError]:
    """What `pod_spec` needs to know of the notebook, by field, to run `what` off the notebook."""
    problems = []
    if not nb.image:
        problems.append(FieldError("image", "the notebook's image is unknown (KUBELAB_IMAGE is not set)"))
    if not nb.namespace:
        problems.append(FieldError("namespace", "the notebook's namespace is unknown (KUBELAB_NAMESPACE)"))
    if not nb.home:
        problems.append(
            FieldError("KUBELAB_HOME", f"is not set: the pod reads {what} from the user's volume")
        )
    return problems


def cronjob(schedule_id: str, name: str, schedule: Schedule, paused: bool, nb: NotebookEnv) -> Manifest:
    pod = pod_spec(nb, "scheduler", ["kubelab", "schedule", "fire", schedule_id], account(schedule_id))
    labels = _labels(schedule_id, nb)
    spec: Manifest = {
        "schedule": schedule.cron,
        "timeZone": schedule.timezone,
        "concurrencyPolicy": CONCURRENCY_POLICY[schedule.concurrency],
        "startingDeadlineSeconds": STARTING_DEADLINE,
        "suspend": paused,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "jobTemplate": {
            "metadata": {"labels": labels},
            "spec": {
                "backoffLimit": 0,
                "ttlSecondsAfterFinished": 7 * 24 * 3600,
                "template": {"metadata": {"labels": labels}, "spec": pod},
            },
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": cronjob_name(name, schedule_id),
            "namespace": nb.namespace,
            "labels": labels,
            "annotations": {"kubelab.io/schedule-name": name},
        },
        "spec": spec,
    }


def pod_spec(nb: NotebookEnv, container: str, command: list[str], service_account: str) -> Manifest:
    """The pod of a kubelab command run for the notebook's user, off the notebook: its image,
    environment (`notebook_environ`), volumes, node selector and tolerations, as
    `service_account`, passing the `restricted` Pod Security level. A schedule's CronJob and a
    pipeline's Workflow (`kubelab.pipelines.argo_workflow`) both run their commands in it."""
    env = [{"name": k, "value": v} for k, v in notebook_environ(nb).items()]
    main: Manifest = {
        "name": container,
        "image": nb.image,
        "command": command,
        "env": env,
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "securityContext": container_security(),
    }
    if nb.mounts:
        main["volumeMounts"] = list(nb.mounts)
    pod: Manifest = {
        "restartPolicy": "Never",
        "serviceAccountName": service_account,
        "automountServiceAccountToken": True,  # it submits Jobs
        "enableServiceLinks": False,
        "securityContext": pod_security(nb),
        "containers": [main],
    }
    if nb.volumes:
        pod["volumes"] = list(nb.volumes)
    if nb.node_selector:
        pod["nodeSelector"] = dict(nb.node_selector)
    if nb.tolerations:
        pod["tolerations"] = list(nb.tolerations)
    return pod


def notebook_environ(nb: NotebookEnv) -> dict[str, str]:
    """The variables `NotebookEnv.from_environ` reads, so the runs a fire submits get the
    notebook's namespace, image, volumes, node selector and tolerations, as if submitted
    from the notebook itself."""
    values = {
        "KUBELAB_BACKEND": "kubernetes",
        "KUBELAB_HOME": nb.home or "",
        "KUBELAB_NAMESPACE": nb.namespace or "",
        "KUBELAB_IMAGE": nb.image or "",
        "KUBELAB_USER": nb.user,
        "JUPYTERHUB_USER": nb.user,
        "KUBELAB_GPU_RESOURCE": nb.gpu_resource,
        "KUBELAB_GPU_TYPE_LABEL": nb.gpu_type_label,
        "PYTHONUNBUFFERED": "1",
    }
    optional = {
        "KUBELAB_SERVICE_ACCOUNT": nb.service_account,
        "KUBELAB_PROJECT": nb.project,
        "KUBELAB_SHM": nb.shm,
        "KUBELAB_NODE_SELECTOR": json.dumps(nb.node_selector) if nb.node_selector else None,
        "KUBELAB_TOLERATIONS": json.dumps(nb.tolerations) if nb.tolerations else None,
        "KUBELAB_VOLUMES": json.dumps({"volumes": nb.volumes, "mounts": nb.mounts}) if nb.volumes else None,
        "KUBELAB_GPU_TYPES": types_json(nb.gpu_types) if nb.gpu_types else None,
    }
    values.update({k: v for k, v in optional.items() if v})
    return values


def cronjob_name(name: str, schedule_id: str) -> str:
    """At most 52 characters: the CronJob controller appends an 11-character suffix to its Jobs."""
    return f"{names.slug(name, 20)}-{schedule_id}"


def _labels(schedule_id: str, nb: NotebookEnv) -> dict[str, str]:
    return {
        names.MANAGED_BY: names.MANAGER,
        "app.kubernetes.io/name": "kubelab-schedule",
        names.USER: names.label_value(nb.user),
        "kubelab.io/schedule": schedule_id,
    }
