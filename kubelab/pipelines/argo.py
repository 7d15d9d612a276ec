"""A pipeline's Workflow on the cluster: submit it, and stop it the way Argo documents.

The thin adapter between the pipeline service and the API server, with the notebook's own
credentials (the backend's `ClusterAccess`); the objects come from the pure builder
`kubelab.pipelines.argo_workflow`. A refusal is reported naming the object and the reason.
Stopping patches `spec.shutdown: Terminate` (Argo's documented stop: the controller kills
the running pods and runs nothing more), which keeps the Workflow for `argo get` / the UI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubelab.backends.base import ClusterAccess
from kubelab.errors import FieldError, ValidationError
from kubelab.pipelines import argo_workflow
from kubelab.pipelines.argo_workflow import GROUP, PLURAL, VERSION

Obj = dict[str, Any]
ACCOUNT_KINDS = ("ServiceAccount", "Role", "RoleBinding")


def submit(cluster: ClusterAccess, pipeline_id: str, name: str, steps: list[Obj]) -> str:
    """Create the namespace's pipeline account (if missing) and the Workflow; its name."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = cluster.api
    core, rbac = client.CoreV1Api(api.client), client.RbacAuthorizationV1Api(api.client)
    creators: dict[str, Callable[..., Any]] = {
        "ServiceAccount": core.create_namespaced_service_account,
        "Role": rbac.create_namespaced_role,
        "RoleBinding": rbac.create_namespaced_role_binding,
    }
    objects = argo_workflow.build(pipeline_id, name, steps, cluster.nb)
    for obj in objects:
        what = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            if obj["kind"] in ACCOUNT_KINDS:
                api.call(creators[obj["kind"]], api.namespace, obj)
            else:
                api.call(
                    api.custom.create_namespaced_custom_object, GROUP, VERSION, api.namespace, PLURAL, obj
                )
        except ApiException as exc:
            if exc.status == 409 and obj["kind"] in ACCOUNT_KINDS:
                continue  # the namespace's account, made by an earlier pipeline
            reason = _reason(exc)
            if exc.status == 403:
                reason += (
                    "; the notebook's Role must allow argoproj.io workflows and the "
                    "namespace's pipeline account (hub_config/rbac/notebook-role.yaml): "
                    "restart the notebook server so the hub applies the current Role"
                )
            problem = FieldError("engine", f"argo: cannot create {what}: {reason}")
            raise ValidationError("cannot submit the pipeline to Argo", [problem]) from exc
    return str(objects[-1]["metadata"]["name"])


def terminate(cluster: ClusterAccess, workflow: str) -> bool:
    """Patch `spec.shutdown: Terminate`; False when the Workflow is gone already."""
    from kubernetes.client.exceptions import ApiException

    api = cluster.api
    try:
        api.call(
            api.custom.patch_namespaced_custom_object,
            GROUP,
            VERSION,
            api.namespace,
            PLURAL,
            workflow,
            {"spec": {"shutdown": "Terminate"}},
        )
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise ValidationError(
            "cannot stop the pipeline's Workflow", [FieldError(f"Workflow/{workflow}", _reason(exc))]
        ) from exc
    return True


def _reason(exc: Any) -> str:
    import json

    try:
        message = json.loads(exc.body).get("message")
    except (ValueError, TypeError, AttributeError):
        message = None
    return str(message) if message else f"{exc.status} {exc.reason}"
