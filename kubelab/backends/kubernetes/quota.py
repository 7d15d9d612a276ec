"""GPU capacity on Kubernetes as the namespace's ResourceQuota allows it.

Nodes are cluster-scoped, out of a notebook's reach; the quota is what bounds its GPUs, and
Jobs still held by the quota or the scheduler are the queue.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes import names, states
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.errors import translate
from kubelab.backends.kubernetes.notebook_env import NotebookEnv


def quota_resources(api: KubeApi, nb: NotebookEnv) -> dict[str, Any]:
    """The namespace and its GPUs: total and free by the quota, and the experiments queued."""
    key = f"requests.{nb.gpu_resource}"
    try:
        quotas = api.list("ResourceQuota").get("items") or []
        jobs = api.list("Job", label_selector=names.user_selector(nb.user))
    except ApiException as exc:
        raise translate(exc, "read the namespace's quota") from exc
    total: int | None = None
    used = 0
    for quota in quotas:
        hard = (quota.get("status") or {}).get("hard") or quota["spec"].get("hard") or {}
        if key in hard or nb.gpu_resource in hard:
            limit = hard[key] if key in hard else hard[nb.gpu_resource]
            spent = ((quota.get("status") or {}).get("used") or {}).get(
                key, ((quota.get("status") or {}).get("used") or {}).get(nb.gpu_resource, "0")
            )
            total, used = int(float(limit)), int(float(spent))
    waiting = [
        j["metadata"]["labels"].get(names.EXPERIMENT)
        for j in jobs.get("items") or []
        if states.observe(dict(j, kind="Job"), []).state in ("Queued",)
    ]
    return {
        "namespace": nb.namespace,
        "gpus": {
            "total": total or 0,
            "free": (total - used) if total is not None else 0,
            "limited": total is not None,
            "resource": nb.gpu_resource,
            "types": [],
            "devices": [],
            "queue": waiting,
        },
    }
