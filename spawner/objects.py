"""Pure builders for what a user's notebook needs besides its pod: plain dicts, easy to
print (`kubelab hub render`), diff and validate against the official schemas.

Default layout: one namespace per user holding a ServiceAccount for the notebook, a Role in
that namespace only (the rules of `hub_config/rbac/notebook-role.yaml`, loaded, not copied), its
RoleBinding, a ResourceQuota from the group's per-user quota, and the user's claim (one, or the
two of earlier versions: spawner/storage_layout.py). Trusted-lab layout (cube-studio's): one
namespace, one shared workspace claim and one shared archive claim, each user on their own
subPath — users there can reach each other's files.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubelab.backends.kubernetes.priority_classes import priority_cap_quota

from .admission_policy import HUB_LABEL, Placement, namespace_annotations
from .bounds import COUNTS, NamespaceBounds, claims_storage
from .groups import Quota
from .labels import MANAGED_BY
from .network import Isolation, network_policies
from .storage_layout import HOME_CLAIM, LAYOUT_ANNOTATION, ONE_CLAIM, TWO_CLAIMS, home_size

DEFAULT_ROLE_FILE = Path(__file__).resolve().parent.parent / "hub_config" / "rbac" / "notebook-role.yaml"


@dataclass(frozen=True)
class Storage:
    """Where workspaces and archives live. In trusted mode the claims are shared; per user, one
    claim (`home_claim`) or, with `layout` TWO_CLAIMS, the two claims of earlier versions."""

    trusted: bool = False
    workspace_claim: str = "kubelab-workspace"
    archive_claim: str = "kubelab-archive"
    home_claim: str = HOME_CLAIM
    layout: str = ONE_CLAIM
    workspace_size: str = "50Gi"
    archive_size: str = "100Gi"
    storage_class: str | None = None
    shared_access_mode: str = "ReadWriteMany"

    @classmethod
    def trusted_lab(cls, **overrides: Any) -> Storage:
        values: dict[str, Any] = {
            "trusted": True,
            "workspace_claim": "kubeflow-user-workspace",
            "archive_claim": "kubeflow-archives",
            "workspace_size": "1Ti",
            "archive_size": "1Ti",
        }
        values.update(overrides)
        return cls(**values)


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**MANAGED_BY, **(labels or {})}}
    if namespace:
        meta["namespace"] = namespace
    return meta


POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")


def pod_security_labels(enforce: str = "baseline") -> dict[str, str]:
    """Pod Security Admission for a user's namespace: the API server itself refuses privileged,
    hostPID, hostNetwork and hostPath pods (`baseline`) whoever creates them, the notebook's own
    token included; `restricted` is audited and warned about, so an admin sees what would break."""
    if enforce not in POD_SECURITY_LEVELS:
        levels = ", ".join(POD_SECURITY_LEVELS)
        raise ValueError(f"pod security level must be one of {levels}, not {enforce!r}")
    prefix = "pod-security.kubernetes.io"
    return {
        f"{prefix}/enforce": enforce,
        f"{prefix}/enforce-version": "latest",
        f"{prefix}/warn": "restricted",
        f"{prefix}/audit": "restricted",
    }


GROUP_ANNOTATION = "kubelab.io/group"


def namespace(name: str, labels: dict[str, str] | None = None, group: str | None = None) -> dict[str, Any]:
    """A user namespace; `group` is the project group of its last spawn, which sets its quota
    (`kubelab hub reconcile` reads it back)."""
    meta = _meta(name, labels=labels)
    if group:
        meta["annotations"] = {GROUP_ANNOTATION: group}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def service_account(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, ns)}


@functools.lru_cache(maxsize=8)
def _role_rules(path: str) -> tuple[str, ...]:
    """The rules of the notebook Role file, kept as JSON text so callers get fresh copies (read
    on every spawn's render: JSON decodes some fifty times faster than YAML)."""
    try:
        documents = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the notebook Role file {path} is missing; set "
            "KubeLabSpawner.notebook_role_file to a Role manifest"
        ) from None
    roles = [d for d in documents if d.get("kind") in ("Role", "ClusterRole")]
    if len(roles) != 1 or not isinstance(roles[0].get("rules"), list):
        raise ValueError(f"{path} must hold exactly one Role with a list of rules")
    return tuple(json.dumps(rule) for rule in roles[0]["rules"])


def role_rules(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    return [json.loads(rule) for rule in _role_rules(str(path or DEFAULT_ROLE_FILE))]


def notebook_role(ns: str, name: str, role_file: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(name, ns),
        "rules": role_rules(role_file),
    }


def role_binding(ns: str, name: str, role: str, account: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(name, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }


def resource_quota(
    ns: str,
    name: str,
    quota: Quota,
    gpu_resources: list[str],
    bounds: NamespaceBounds | None = None,
    storage: str | None = None,
) -> dict[str, Any] | None:
    """The group's per-user quota as Kubernetes enforces it, for notebooks and experiments alike,
    with the namespace's object counts, no NodePort or LoadBalancer Services, and its claims'
    and containers' storage when `bounds` is given. None when there is nothing to limit."""
    hard: dict[str, str] = {}
    if quota.gpus is not None:
        for resource in sorted(set(gpu_resources)) or ["nvidia.com/gpu"]:
            dra = resource.endswith(".deviceclass.resource.k8s.io/devices")  # a DRA type's claimed devices
            hard[resource if dra else f"requests.{resource}"] = str(quota.gpus)
    if quota.cpu is not None:
        hard["requests.cpu"] = quota.cpu
    if quota.memory is not None:
        hard["requests.memory"] = quota.memory
    if bounds is not None:
        hard.update({name: str(getattr(bounds, key)) for key, name in COUNTS.items()})
        hard["services.nodeports"] = "0"
        hard["services.loadbalancers"] = "0"
        if storage is not None:
            hard["requests.storage"] = storage
        hard["requests.ephemeral-storage"] = bounds.ephemeral_storage
    if not hard:
        return None
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _meta(name, ns), "spec": {"hard": hard}}


LIMIT_RANGE = "kubelab-limits"


def limit_range(ns: str, bounds: NamespaceBounds) -> dict[str, Any]:
    """Per container: a minimum request (so a namespace's pods cannot each ask for `1m` and fill
    nodes' pod slots within its CPU quota), a maximum, defaults for containers that set nothing
    (a quota on a resource refuses pods that do not ask for it) and a limit/request ratio."""
    container = {
        "type": "Container",
        "min": {"cpu": bounds.min_cpu, "memory": bounds.min_memory},
        "max": {"cpu": bounds.max_cpu, "memory": bounds.max_memory},
        "default": {
            "cpu": bounds.default_cpu,
            "memory": bounds.default_memory,
            "ephemeral-storage": bounds.default_ephemeral_storage,
        },
        "defaultRequest": {
            "cpu": bounds.default_request_cpu,
            "memory": bounds.default_request_memory,
            "ephemeral-storage": bounds.default_request_ephemeral_storage,
        },
        "maxLimitRequestRatio": {"cpu": str(bounds.cpu_ratio), "memory": str(bounds.memory_ratio)},
    }
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": _meta(LIMIT_RANGE, ns),
        "spec": {"limits": [container]},
    }


def claim(ns: str, name: str, size: str, storage_class: str | None, access_mode: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [access_mode], "resources": {"requests": {"storage": size}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": _meta(name, ns), "spec": spec}


def storage_claims(ns: str, storage: Storage) -> list[dict[str, Any]]:
    """The user's claim, or the workspace and archive claims (the two of earlier versions, or the
    shared ones in trusted mode)."""
    mode = storage.shared_access_mode if storage.trusted else "ReadWriteOnce"
    if not storage.trusted and storage.layout != TWO_CLAIMS:
        size = home_size(storage.workspace_size, storage.archive_size)
        return [claim(ns, storage.home_claim, size, storage.storage_class, mode)]
    return [
        claim(ns, storage.workspace_claim, storage.workspace_size, storage.storage_class, mode),
        claim(ns, storage.archive_claim, storage.archive_size, storage.storage_class, mode),
    ]


def user_namespace_objects(
    ns: str,
    user: str,
    account: str,
    quota: Quota,
    gpu_resources: list[str],
    storage: Storage,
    role_file: str | os.PathLike[str] | None = None,
    *,
    group: str | None = None,
    isolation: Isolation | None = None,
    bounds: NamespaceBounds | None = None,
    placement: Placement | None = None,
    max_priority: str | None = None,
) -> list[dict[str, Any]]:
    """Everything prepared in a user's namespace on spawn, in creation order (namespace first);
    NetworkPolicies when `isolation` is given; with `bounds` and `placement` the object counts,
    the LimitRange, and the label and annotations the admission policies read."""
    labels = {"kubelab.io/user": user}
    if placement is not None:
        labels[HUB_LABEL] = placement.hub_namespace
    space = namespace(ns, labels, group)
    space["metadata"].setdefault("annotations", {})[LAYOUT_ANNOTATION] = storage.layout
    if placement is not None and bounds is not None:
        space["metadata"].setdefault("annotations", {}).update(namespace_annotations(placement, bounds))
    objects = [
        space,
        service_account(ns, account),
        notebook_role(ns, account, role_file),
        role_binding(ns, account, account, account),
    ]
    claims = storage_claims(ns, storage)
    sizes = [c["spec"]["resources"]["requests"]["storage"] for c in claims]
    used = claims_storage(bounds, sizes) if bounds else None
    limits = resource_quota(ns, "kubelab-quota", quota, gpu_resources, bounds, used)
    if limits:
        objects.append(limits)
    if bounds is not None:
        objects.append(limit_range(ns, bounds))
    cap = priority_cap_quota(ns, max_priority)  # the group's highest run priority
    if cap is not None:
        objects.append(cap)
    if isolation is not None:
        objects.extend(network_policies(ns, isolation))
    return objects + claims


def trusted_objects(
    ns: str, account: str, storage: Storage, role_file: str | os.PathLike[str] | None = None
) -> list[dict[str, Any]]:
    """The shared objects of trusted-lab mode: one account and Role for all notebooks, shared claims."""
    return [
        service_account(ns, account),
        notebook_role(ns, account, role_file),
        role_binding(ns, account, account, account),
        *storage_claims(ns, storage),
    ]
