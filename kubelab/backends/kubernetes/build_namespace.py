"""What an admin applies to the build namespace: the Role a notebook's account gets there, its
binding per user namespace, and the ValidatingAdmissionPolicy that admits only the builder.

The namespace's Pod Security level is `privileged` (rootless BuildKit's user namespace needs
Unconfined seccomp), so RBAC alone would hand every user a privileged pod: the policy, checked
by the API server whoever asks, refuses any Job there whose pod is not `image_build.build_job`'s
shape (pure builders; `kubelab hub render --all` prints them).
"""

from __future__ import annotations

import json

from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.image_build import (
    BUILDER_UID,
    BUILDS_LABEL,
    COMMAND,
    BuildSettings,
    Manifest,
)

ROLE_NAME = "kubelab-builds"
POLICY_NAME = "kubelab-builds"
API = "admissionregistration.k8s.io/v1"
_LABELS = {names.MANAGED_BY: names.MANAGER}


def namespace(settings: BuildSettings) -> Manifest:
    """The build namespace: `privileged` Pod Security, labelled for the policy's binding."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": settings.namespace,
            "labels": {
                **_LABELS,
                BUILDS_LABEL: "true",
                "pod-security.kubernetes.io/enforce": "privileged",
            },
        },
    }


def role(settings: BuildSettings) -> Manifest:
    """Jobs to create, watch and delete, their pods' states and logs; no pods, no secrets."""
    jobs = ["create", "get", "list", "watch", "delete"]
    rules = [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": jobs},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    ]
    meta = {"name": ROLE_NAME, "namespace": settings.namespace, "labels": _LABELS}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules}


def role_binding(settings: BuildSettings, user_namespace: str, service_account: str) -> Manifest:
    """One user namespace's notebook account gets `role` in the build namespace."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": f"{ROLE_NAME}-{user_namespace}"[:253],
            "namespace": settings.namespace,
            "labels": _LABELS,
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": user_namespace}],
    }


def _rules(settings: BuildSettings) -> list[tuple[str, str]]:
    pod, box = "object.spec.template.spec", "object.spec.template.spec.containers[0]"
    sc = f"{box}.securityContext"
    return [
        (
            f"{pod}.containers.size() == 1 && !has({pod}.initContainers) && !has({pod}.ephemeralContainers)",
            "a build pod has exactly one container, the builder",
        ),
        (
            f"{box}.image == {json.dumps(settings.builder_image)} && has({box}.command) && "
            f"{box}.command == {json.dumps(COMMAND)}",
            f"a build pod runs {settings.builder_image} with kubelab's builder command",
        ),
        (
            f"has({sc}) && has({sc}.runAsUser) && {sc}.runAsUser == {BUILDER_UID} && "
            f"(!has({sc}.privileged) || !{sc}.privileged) && "
            f"(!has({sc}.capabilities) || !has({sc}.capabilities.add))",
            f"the builder runs as uid {BUILDER_UID}, unprivileged, with no added capability",
        ),
        (
            f"!has({pod}.securityContext) || !has({pod}.securityContext.runAsUser) || "
            f"{pod}.securityContext.runAsUser == {BUILDER_UID}",
            f"the build pod runs as uid {BUILDER_UID}",
        ),
        (
            f"(!has({pod}.hostNetwork) || !{pod}.hostNetwork) && (!has({pod}.hostPID) || !{pod}.hostPID)"
            f" && (!has({pod}.hostIPC) || !{pod}.hostIPC) && (!has({pod}.nodeName) || {pod}.nodeName == '')",
            "a build pod shares no host namespace and does not name its node",
        ),
        (
            f"has({pod}.automountServiceAccountToken) && !{pod}.automountServiceAccountToken",
            "a build pod carries no ServiceAccount token",
        ),
        (
            f"!has({pod}.volumes) || {pod}.volumes.all(v, has(v.emptyDir) || "
            f"(has(v.secret) && v.secret.secretName == {json.dumps(settings.secret)}))",
            f"a build pod mounts only empty folders and the registry Secret {settings.secret}",
        ),
        (
            f"!has({box}.envFrom) && (!has({box}.env) || {box}.env.all(e, !has(e.valueFrom))) && "
            f"(!has({box}.ports) || {box}.ports.all(p, !has(p.hostPort))) && !has({box}.volumeDevices)",
            "the builder reads no other Secret or ConfigMap and binds no host port",
        ),
    ]


def policy(settings: BuildSettings) -> list[Manifest]:
    """The policy and its binding to namespaces labelled `kubelab.io/builds=true`."""
    validations = [
        {"expression": expression, "message": f"{message} (the build namespace's policy)"}
        for expression, message in _rules(settings)
    ]
    constraints = {
        "resourceRules": [
            {
                "apiGroups": ["batch"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["jobs"],
            }
        ]
    }
    return [
        {
            "apiVersion": API,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": POLICY_NAME, "labels": _LABELS},
            "spec": {"failurePolicy": "Fail", "matchConstraints": constraints, "validations": validations},
        },
        {
            "apiVersion": API,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POLICY_NAME, "labels": _LABELS},
            "spec": {
                "policyName": POLICY_NAME,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {BUILDS_LABEL: "true"}}},
            },
        },
    ]


def admin_objects(settings: BuildSettings) -> list[Manifest]:
    """Everything but the per-user bindings and the registry Secret, in applying order."""
    return [*policy(settings), namespace(settings), role(settings)]
