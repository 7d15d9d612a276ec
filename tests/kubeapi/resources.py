"""The resource types the test server serves, and the discovery documents built from them.

One row per resource, like the API server's registry: where it lives (group/version), whether it
is namespaced, which subresources it has. Custom resources (Kubeflow, Kueue) are optional
extensions so tests can check both "operator installed" and "not installed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
EXTENSIONS = ("kubeflow", "kueue")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource, e.g. `pods` in the core group or `jobs` in `batch/v1`."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    extension: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def key(self) -> str:
        """Unique store key, e.g. `pods` or `jobs.batch`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


CORE = "v1"
_TYPES = [
    ResourceType("", CORE, "namespaces", "Namespace", False, ("ns",), ("status", "finalize")),
    ResourceType("", CORE, "pods", "Pod", True, ("po",), ("status", "log")),
    ResourceType("", CORE, "services", "Service", True, ("svc",), ("status",)),
    ResourceType("", CORE, "endpoints", "Endpoints", True, ("ep",)),
    ResourceType("", CORE, "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",),
                 ("status",)),
    ResourceType("", CORE, "persistentvolumes", "PersistentVolume", False, ("pv",), ("status",)),
    ResourceType("", CORE, "secrets", "Secret", True),
    ResourceType("", CORE, "configmaps", "ConfigMap", True, ("cm",)),
    ResourceType("", CORE, "serviceaccounts", "ServiceAccount", True, ("sa",), ("token",)),
    ResourceType("", CORE, "events", "Event", True, ("ev",)),
    ResourceType("", CORE, "nodes", "Node", False, ("no",), ("status",)),
    ResourceType("", CORE, "resourcequotas", "ResourceQuota", True, ("quota",), ("status",)),
    ResourceType("batch", "v1", "jobs", "Job", True, (), ("status",)),
    ResourceType("networking.k8s.io", "v1", "ingresses", "Ingress", True, ("ing",), ("status",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                 False),
    ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True, (), ("status",),
                 "kubeflow"),
    ResourceType("kubeflow.org", "v1", "tfjobs", "TFJob", True, (), ("status",), "kubeflow"),
    ResourceType("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue", True, ("queue",),
                 ("status",), "kueue"),
    ResourceType("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", False, ("cq",),
                 ("status",), "kueue"),
    ResourceType("kueue.x-k8s.io", "v1beta1", "resourceflavors", "ResourceFlavor", False,
                 ("flavor",), (), "kueue"),
    ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True, ("wl",),
                 ("status",), "kueue"),
]


class Registry:
    """The resource types one server instance serves (core + enabled extensions)."""

    def __init__(self, extensions: tuple[str, ...] | list[str] = ()) -> None:
        unknown = set(extensions) - set(EXTENSIONS)
        if unknown:
            raise ValueError(f"unknown extensions {sorted(unknown)}; known: {list(EXTENSIONS)}")
        self.types = [t for t in _TYPES if not t.extension or t.extension in extensions]
        self._by_path = {(t.group, t.version, t.plural): t for t in self.types}
        self._by_kind = {(t.api_version, t.kind): t for t in self.types}
        self._by_key = {t.key: t for t in self.types}

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def by_key(self, key: str) -> ResourceType:
        return self._by_key[key]

    def group_versions(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for t in self.types:
            versions = groups.setdefault(t.group, [])
            if t.version not in versions:
                versions.append(t.version)
        return groups

    # -- discovery documents -------------------------------------------------------------
    def resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        types = [t for t in self.types if t.group == group and t.version == version]
        if not types:
            return None
        resources: list[dict[str, Any]] = []
        for t in types:
            entry = {"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced,
                     "kind": t.kind, "verbs": list(ALL_VERBS)}
            if t.short_names:
                entry["shortNames"] = list(t.short_names)
            resources.append(entry)
            for sub in t.subresources:
                sub_kind = {"log": t.kind, "token": "TokenRequest"}.get(sub, t.kind)
                verbs = {"log": ["get"], "token": ["create"], "finalize": ["update"]}.get(
                    sub, ["get", "patch", "update"])
                sub_entry = {"name": f"{t.plural}/{sub}", "singularName": "",
                             "namespaced": t.namespaced, "kind": sub_kind, "verbs": verbs}
                if sub == "token":
                    sub_entry.update(group="authentication.k8s.io", version="v1")
                resources.append(sub_entry)
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": resources}

    def api_group(self, group: str) -> dict[str, Any] | None:
        versions = self.group_versions().get(group)
        if not group or not versions:
            return None
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": entries,
                "preferredVersion": entries[0]}

    def api_group_list(self) -> dict[str, Any]:
        groups = [self.api_group(g) for g in self.group_versions() if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
