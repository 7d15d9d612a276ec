"""Bringing a user namespace's objects up to date: server-side apply as field manager `kubelab`.

The spawner (on every spawn) and `kubelab hub reconcile` (for every user namespace) call
`reconcile_namespace` with the objects the current configuration builds. It

- applies each object (`fieldManager=kubelab`, `force=true`), so a changed catalog, group quota
  or Role reaches namespaces that already exist, and a field kubelab stops setting goes away;
- migrates an object a previous version wrote with create/replace (or someone edited with
  `kubectl edit`): its fields are handed to kubelab's apply, which then drops what it no longer
  sets, and from then on `kubelab` alone owns the object;
- deletes kubelab's policies, Roles, bindings and quotas the configuration no longer builds;
- creates claims only if missing and never changes or deletes one: they hold users' data. In a
  namespace that existed, its claims are listed first and only the missing ones are created:
  the quota's admission charges a create before the duplicate is refused (until the quota
  controller's next full resync), so a create of a claim that exists is refused as `exceeded
  quota` in a namespace at its storage quota, and repeated reconciles fill one that is not;
- waits until the controller-manager has counted each ResourceQuota it applied (the quota's
  status holds every limit its spec sets): until that first count, the API server's quota
  admission checks nothing against it, so a pod made earlier would run unbounded;
- records a hash of what it applied on the bundle's first object (the namespace), last, so a
  spawn (`ensure_bundle`) reads that one object and writes nothing while the configuration
  renders the same bundle. A reconcile cut short leaves no hash: the next spawn redoes it.

Busy answers (429, 5xx) are retried with jitter (kubelab.spawner.retry).

A thin adapter over kubernetes_asyncio's ApiClient (raw paths: one code path for every kind).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client.rest import ApiException

from .labels import MANAGED_BY
from .retry import retrying

FIELD_MANAGER = "kubelab"
QUOTA_COUNT_TIMEOUT = 120.0  # seconds a new quota may wait for the controller-manager's first count
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class Resource:
    prefix: str
    plural: str
    namespaced: bool = True


RESOURCES = {
    "Namespace": Resource("/api/v1", "namespaces", namespaced=False),
    "ServiceAccount": Resource("/api/v1", "serviceaccounts"),
    "ResourceQuota": Resource("/api/v1", "resourcequotas"),
    "PersistentVolumeClaim": Resource("/api/v1", "persistentvolumeclaims"),
    "ConfigMap": Resource("/api/v1", "configmaps"),
    "LimitRange": Resource("/api/v1", "limitranges"),
    "Role": Resource("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": Resource("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "NetworkPolicy": Resource("/apis/networking.k8s.io/v1", "networkpolicies"),
    "ClusterRole": Resource("/apis/rbac.authorization.k8s.io/v1", "clusterroles", namespaced=False),
    "ClusterRoleBinding": Resource(
        "/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", namespaced=False
    ),
    "ValidatingAdmissionPolicy": Resource(
        "/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", namespaced=False
    ),
    "ValidatingAdmissionPolicyBinding": Resource(
        "/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", namespaced=False
    ),
    "ResourceClaimTemplate": Resource("/apis/resource.k8s.io/v1", "resourceclaimtemplates"),
    "ResourceClaim": Resource("/apis/resource.k8s.io/v1", "resourceclaims"),
    "PriorityClass": Resource("/apis/scheduling.k8s.io/v1", "priorityclasses", namespaced=False),
    "WorkloadPriorityClass": Resource(
        "/apis/kueue.x-k8s.io/v1beta1", "workloadpriorityclasses", namespaced=False
    ),
}
# kinds whose content kubelab owns whole: migrated from older writers, pruned when no longer built
OWNED = ("Role", "RoleBinding", "ResourceQuota", "NetworkPolicy", "LimitRange")
# kinds only ever created: a claim is a user's data
CREATE_ONLY = ("PersistentVolumeClaim",)
BUNDLE_HASH = "kubelab.io/bundle-hash"


def bundle_hash(objects: list[dict[str, Any]]) -> str:
    """What a bundle renders to, in 32 hex digits: equal bundles, equal hashes."""
    canonical = json.dumps(objects, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def with_hash(obj: dict[str, Any], digest: str) -> dict[str, Any]:
    marked = copy.deepcopy(obj)
    marked["metadata"].setdefault("annotations", {})[BUNDLE_HASH] = digest
    return marked


def path(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    resource = RESOURCES[kind]
    parts = [resource.prefix]
    if resource.namespaced:
        parts.append(f"namespaces/{namespace}")
    parts.append(resource.plural)
    if name:
        parts.append(name)
    return "/".join(parts)


def is_legacy(obj: dict[str, Any]) -> bool:
    """Written (not applied) by someone: an older kubelab's create/replace, or a hand edit."""
    return any(
        entry.get("operation") == "Update" and not entry.get("subresource")
        for entry in obj.get("metadata", {}).get("managedFields") or []
    )


def _union(into: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    for key, value in fields.items():
        into[key] = (
            _union(into.get(key) or {}, value)
            if isinstance(value, dict) and value
            else (into.get(key) or value)
        )
    return into


def take_ownership(managed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The managed fields with every field written outside a subresource owned by one entry,
    kubelab's apply (what `kubectl apply --server-side` does when it takes over from client-side
    apply). Status entries (a quota's usage, written by its controller) stay as they are."""
    fields: dict[str, Any] = {}
    api_version = None
    for entry in managed:
        if not entry.get("subresource"):
            _union(fields, entry.get("fieldsV1") or {})
            api_version = api_version or entry.get("apiVersion")
    mine = {
        "manager": FIELD_MANAGER,
        "operation": "Apply",
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    return [mine, *(e for e in managed if e.get("subresource"))]


@dataclass
class Outcome:
    """What one reconcile did, by `Kind/name` (for the CLI's report and for tests)."""

    applied: list[str]
    migrated: list[str]
    created: list[str]
    deleted: list[str]
    current: bool = False  # the recorded hash matched: nothing was written

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "applied": self.applied,
            "migrated": self.migrated,
            "created": self.created,
            "deleted": self.deleted,
        }


class Applier:
    """Server-side apply over one ApiClient; `timeout` bounds each request."""

    def __init__(self, api_client: Any, timeout: float = 30) -> None:
        self.client = api_client
        self.timeout = timeout

    async def request(
        self,
        method: str,
        url: str,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}

        def call() -> Any:
            return asyncio.wait_for(
                self.client.call_api(
                    url,
                    method,
                    query_params=query or [],
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                    response_types_map={200: "object", 201: "object", 202: "object"},
                    _return_http_data_only=True,
                ),
                self.timeout,
            )

        # an apply may meet a conflict another writer just caused; a create's 409 is an answer
        return await retrying(call, conflicts=method == "PATCH")

    async def read(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        meta = obj["metadata"]
        try:
            found: dict[str, Any] = await self.request(
                "GET", path(obj["kind"], meta.get("namespace"), meta["name"])
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    async def apply(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        meta = obj["metadata"]
        query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
        if dry_run:
            query.append(("dryRun", "All"))
        applied: dict[str, Any] = await self.request(
            "PATCH",
            path(obj["kind"], meta.get("namespace"), meta["name"]),
            json.loads(json.dumps(obj)),
            query,
            APPLY,
        )
        return applied

    async def migrate(self, current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
        """Hand every field of `current` to kubelab's apply (see `take_ownership`), then apply
        again: what the wanted object no longer sets is now kubelab's alone, so it goes."""
        meta = wanted["metadata"]
        url = path(wanted["kind"], meta.get("namespace"), meta["name"])
        owned = take_ownership(current["metadata"].get("managedFields") or [])
        await self.request("PATCH", url, {"metadata": {"managedFields": owned}}, content_type=MERGE)
        return await self.apply(wanted)

    async def create_if_missing(self, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        try:
            await self.request(
                "POST",
                path(obj["kind"], meta.get("namespace")),
                json.loads(json.dumps(obj)),
                [("fieldManager", FIELD_MANAGER)],
            )
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def api_server_slices(self) -> list[dict[str, Any]]:
        """The EndpointSlices of default/kubernetes: where pods reach the API server."""
        listed = await self.request(
            "GET",
            "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
            query=[("labelSelector", "kubernetes.io/service-name=kubernetes")],
        )
        return listed.get("items") or []

    async def names(self, kind: str, namespace: str) -> list[str]:
        """Every `kind` object's name in `namespace`, whoever made it."""
        listed = await self.request("GET", path(kind, namespace))
        return [item["metadata"]["name"] for item in listed.get("items") or []]

    async def owned_names(self, kind: str, namespace: str) -> list[str]:
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        listed = await self.request("GET", path(kind, namespace), query=[("labelSelector", selector)])
        return sorted(item["metadata"]["name"] for item in listed.get("items") or [])

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        try:
            await self.request("DELETE", path(kind, namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def ensure_bundle(
        self,
        namespace: str,
        objects: Iterable[dict[str, Any]],
        prune: bool = True,
        turn: Callable[[], AbstractAsyncContextManager[Any]] = contextlib.nullcontext,
        known: dict[str, Any] | None = None,
        fresh: bool = False,
    ) -> Outcome:
        """A spawn's check of the hash on the bundle's first object: `known` (a watch's copy of
        it; with `fresh`, what the API server just answered, None for no object, not read
        again), else one read; a reconcile, inside `turn()` (the hub's spawn queue), only when the
        object read from the API server is missing or its hash differs from what `objects`
        render to. A returning user's check does not queue: it is one read, or none."""
        wanted = list(objects)
        digest = bundle_hash(wanted)
        if known is not None and current(known, digest):
            return Outcome([], [], [], [], current=True)
        # what a watch had may be old: ask before writing
        anchor = known if fresh else await self.read(wanted[0])
        if anchor is not None and current(anchor, digest):
            return Outcome([], [], [], [], current=True)
        async with turn():  # a namespace that did not exist holds nothing to prune, no claim
            existed = anchor is not None
            return await self.reconcile_namespace(namespace, wanted, prune and existed, existed)

    async def reconcile_namespace(
        self, namespace: str, objects: Iterable[dict[str, Any]], prune: bool = True, existed: bool = True
    ) -> Outcome:
        """Bring `namespace` to `objects` (see the module docstring). RBAC goes in order: a
        RoleBinding after its Role, whose rights the API server checks when binding; the rest
        in parallel. `prune` is off for a namespace kubelab shares (trusted-lab mode). The
        bundle's hash goes on its first object last (its first apply drops the old one)."""
        wanted = list(objects)
        digest = bundle_hash(wanted)
        outcome = Outcome([], [], [], [])
        rbac = [o for o in wanted if o["kind"] in ("Role", "RoleBinding")]
        rest = [o for o in wanted if o["kind"] not in ("Role", "RoleBinding", "Namespace")]
        spaces = [o for o in wanted if o["kind"] == "Namespace"]
        kinds = sorted({o["kind"] for o in wanted if o["kind"] in CREATE_ONLY}) if existed else []
        names = await asyncio.gather(*(self.names(kind, namespace) for kind in kinds))
        present = {(kind, name) for kind, listed in zip(kinds, names, strict=True) for name in listed}

        quotas: list[dict[str, Any]] = []  # as applied: the limits in the API server's own form

        async def one(obj: dict[str, Any]) -> None:
            key = f"{obj['kind']}/{obj['metadata']['name']}"
            if obj["kind"] in CREATE_ONLY:
                missing = (obj["kind"], obj["metadata"]["name"]) not in present
                if missing and await self.create_if_missing(obj):
                    outcome.created.append(key)
                return
            result = await self.apply(obj)
            if obj["kind"] in OWNED and is_legacy(result):
                result = await self.migrate(result, obj)  # what it sets now: the older fields gone
                outcome.migrated.append(key)
            else:
                outcome.applied.append(key)
            if obj["kind"] == "ResourceQuota":
                quotas.append(result)

        async def in_order() -> None:
            for obj in rbac:
                await one(obj)

        for obj in spaces:  # the namespace first: everything else lives in it
            await one(obj)
        await asyncio.gather(in_order(), *(one(o) for o in rest))
        if prune:
            await self._prune(namespace, {(o["kind"], o["metadata"]["name"]) for o in wanted}, outcome)
        await asyncio.gather(*(self.wait_counted(quota) for quota in quotas))
        if wanted:
            await self.apply(with_hash(wanted[0], digest))
        return outcome

    async def wait_counted(self, quota: dict[str, Any], timeout: float = QUOTA_COUNT_TIMEOUT) -> None:
        """Until the quota controller has counted `quota` as applied: its status holds the spec's
        limits (the applied object, then reads backing off from 50 ms to 1 s). Past `timeout`
        the spawn fails, saying why, rather than start a pod the quota does not yet bound."""
        hard = (quota.get("spec") or {}).get("hard") or {}
        meta = quota["metadata"]
        deadline, delay = time.monotonic() + timeout, 0.05
        while not counted(quota, hard):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the ResourceQuota {meta['namespace']}/{meta['name']} was not counted by the "
                    f"controller-manager within {timeout:.0f} s; no notebook starts in a namespace "
                    "whose quota is not yet enforced (try again; an admin: is the controller-manager "
                    "running?)"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
            quota = await self.read(quota) or quota

    async def _prune(self, namespace: str, keep: set[tuple[str, str]], outcome: Outcome) -> None:
        listed = await asyncio.gather(*(self.owned_names(kind, namespace) for kind in OWNED))
        stale = [(k, n) for k, names in zip(OWNED, listed, strict=True) for n in names if (k, n) not in keep]
        gone = await asyncio.gather(*(self.delete(k, namespace, n) for k, n in stale))
        outcome.deleted.extend(f"{k}/{n}" for (k, n), deleted in zip(stale, gone, strict=True) if deleted)


def counted(quota: dict[str, Any], hard: dict[str, Any]) -> bool:
    """Whether the quota controller has counted the quota with the limits `hard`: it writes the
    status's limits with the usage it counted, in one update (a kind the cluster does not serve,
    such as KServe's without KServe, gets a limit and no usage)."""
    return (quota.get("status") or {}).get("hard") == hard


def current(anchor: dict[str, Any], digest: str) -> bool:
    """Whether the bundle's first object records `digest` and is not being deleted."""
    meta = anchor.get("metadata") or {}
    return (meta.get("annotations") or {}).get(BUNDLE_HASH) == digest and not meta.get("deletionTimestamp")


def api_message(exc: ApiException) -> str:
    """The API server's own sentence from an error answer (its Status `message`)."""
    try:
        return str(json.loads(exc.body or b"")["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.reason)
