"""Connecting to the cluster: in-cluster credentials in a pod, else a kubeconfig file.

A kubeconfig's current context may name the namespace; the notebook's own setting
(`KUBELAB_NAMESPACE`) wins over it.
"""

from __future__ import annotations

import os
from dataclasses import replace

from kubernetes import client, config

from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import FieldError, ValidationError


def in_cluster_client() -> client.ApiClient:
    """The pod's service account, as the kubelet mounts it."""
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def kubeconfig_client(
    path: str | os.PathLike[str] | None, nb: NotebookEnv
) -> tuple[client.ApiClient, NotebookEnv]:
    """A client from the kubeconfig at `path` (None: KUBECONFIG's default), and `nb` with the
    context's namespace (or `default`) when it names none."""
    file = str(path) if path else None
    try:
        api_client = config.new_client_from_config(config_file=file)
        _, active = config.list_kube_config_contexts(config_file=file)
    except (config.ConfigException, OSError) as exc:
        raise ValidationError(
            "no Kubernetes configuration", [FieldError("KUBECONFIG", f"cannot load a kubeconfig: {exc}")]
        ) from exc
    if not nb.namespace:
        nb = replace(nb, namespace=(active or {}).get("context", {}).get("namespace") or "default")
    return api_client, nb
