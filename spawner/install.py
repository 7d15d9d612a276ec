"""Pure builders for what a lab admin applies besides the z2jh chart (`kubelab hub render --all`).

- the hub's ClusterRole and its binding to z2jh's `hub` ServiceAccount (hub_config/rbac/
  hub-clusterrole.yaml with the hub's namespace filled in);
- the notebook Role as the ConfigMap `kubelab-notebook-role`, which values.yaml mounts at
  /etc/kubelab and the hub reads (`notebook_role_file`): edit the YAML file, render, apply;
  no hand copy drifts from the file;
- in trusted-lab mode, the shared namespace's account, Role, binding and claims.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from .labels import MANAGED_BY
from .objects import DEFAULT_ROLE_FILE

HUB_CLUSTER_ROLE_FILE = DEFAULT_ROLE_FILE.parent / "hub-clusterrole.yaml"
ROLE_CONFIGMAP = "kubelab-notebook-role"
ROLE_CONFIGMAP_KEY = "notebook-role.yaml"
ROLE_MOUNT = "/etc/kubelab"


def hub_rbac(
    hub_namespace: str, hub_account: str = "hub", path: str | os.PathLike[str] = HUB_CLUSTER_ROLE_FILE
) -> list[dict[str, Any]]:
    """The ClusterRole and ClusterRoleBinding of the file, bound to `hub_account` in `hub_namespace`."""
    documents = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    kinds = sorted(d.get("kind", "") for d in documents)
    if kinds != ["ClusterRole", "ClusterRoleBinding"]:
        raise ValueError(f"{path} must hold one ClusterRole and one ClusterRoleBinding, not {kinds}")
    result = []
    for document in documents:
        document = copy.deepcopy(document)
        if document["kind"] == "ClusterRoleBinding":
            document["subjects"] = [
                {"kind": "ServiceAccount", "name": hub_account, "namespace": hub_namespace}
            ]
        result.append(document)
    return sorted(result, key=lambda d: d["kind"])  # the role before its binding


def notebook_role_configmap(
    hub_namespace: str, role_file: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The notebook Role file as the ConfigMap the hub mounts (its text as is, comments too)."""
    from .objects import role_rules

    path = Path(role_file or DEFAULT_ROLE_FILE)
    role_rules(path)  # refuse a file the spawner could not read, here rather than at spawn
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ROLE_CONFIGMAP, "namespace": hub_namespace, "labels": dict(MANAGED_BY)},
        "data": {ROLE_CONFIGMAP_KEY: path.read_text()},
    }
