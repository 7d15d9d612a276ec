"""`kubelab hub reconcile`: every user namespace brought up to date after an upgrade.

A spawn reconciles its own namespace; this does it for all of them at once (users who do not
log in for weeks keep last version's Role, quota and policies otherwise). Each namespace is
found by the labels the spawner puts on it (`app.kubernetes.io/managed-by=kubelab`,
`kubelab.io/user`), its group by the annotation of its last spawn (`kubelab.io/group`; none,
or a group the configuration no longer declares: `public`), and its objects are built by
the same KubeLabSpawner code a spawn uses, from the same configuration file, with the storage
layout the namespace has (kubelab.spawner.storage_layout: a user with the two claims of earlier
versions keeps them).
"""

from __future__ import annotations

from typing import Any, cast

from kubelab.errors import KubelabError

from .apply import Applier
from .labels import MANAGED_BY
from .objects import GROUP_ANNOTATION
from .offline import offline_spawner
from .storage_layout import find

USER_LABEL = "kubelab.io/user"


async def reconcile_all(config: Any, users: list[str] | None = None) -> list[dict[str, Any]]:
    """One report per namespace: applied, migrated, created and deleted objects, or the error."""
    probe = await offline_spawner(config, "-", [])
    if probe.trusted_lab:
        raise KubelabError("trusted-lab mode has no user namespaces; a spawn keeps the shared one current")
    applier = Applier(probe.api.api_client, probe.k8s_api_request_timeout)
    selector = ",".join([*(f"{k}={v}" for k, v in MANAGED_BY.items()), USER_LABEL])
    listed = await applier.request("GET", "/api/v1/namespaces", query=[("labelSelector", selector)])
    api_server = await probe.api_server() if probe.isolation(None) else None
    declared = set(dict(config.JupyterHub.get("load_groups", {}) or {}))
    reports = []
    for item in sorted(listed.get("items") or [], key=lambda i: i["metadata"]["name"]):
        meta = item["metadata"]
        user = meta["labels"][USER_LABEL]
        if users and user not in users:
            continue
        recorded = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
        group_name = cast(str, recorded) if recorded in declared else "public"
        report: dict[str, Any] = {"namespace": meta["name"], "user": user, "group": group_name}
        if meta.get("deletionTimestamp"):  # Terminating: nothing can be created in it any more
            reports.append({**report, "skipped": "the namespace is being deleted"})
            continue
        try:
            spawner = await offline_spawner(config, user, [g for g in [group_name] if g != "public"])
            spawner.namespace = meta["name"]
            spawner.storage_found = await find(applier, meta["name"], item)  # its claims, kept
            _, group = spawner._choose({"group": group_name})
            wanted = spawner.namespace_objects(group, api_server)
            wanted[0]["metadata"]["labels"][USER_LABEL] = user  # as the spawn that made it wrote it
            outcome = await applier.reconcile_namespace(meta["name"], wanted)
            report.update(outcome.as_dict())
        except Exception as exc:  # one broken namespace must not stop the others
            report["error"] = str(exc).strip() or type(exc).__name__
        reports.append(report)
    return reports
