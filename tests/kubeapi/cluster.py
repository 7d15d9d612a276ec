"""The API semantics: create/get/list/update/patch/delete with admission, independent of HTTP.

`Cluster` ties the store, validation, defaulting, quota, RBAC escalation checks and the
controllers together. Writes run inside `transaction()`; reactions to a write (the Job
controller, quota status) run when the outermost transaction ends, before the response is sent,
so a test that creates a Job can list its pods right after.
"""

from __future__ import annotations

import base64
import copy
import json
import random
import string
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import defaults, patch
from .auth import Authenticator, Authorizer, User
from .controller import JobController
from .errors import ApiError, already_exists, bad_request, conflict, forbidden, invalid, not_found
from .faults import FaultInjector
from .quota import QuotaKeeper
from .resources import Registry, ResourceType
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .store import Store
from .validation import ObjectValidator

_SERVER_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                "selfLink", "generation", "managedFields")
# Kinds whose DELETE answers with the deleted object (as the OpenAPI spec declares) instead
# of a Status.
_DELETE_RETURNS_OBJECT = {"pods", "namespaces", "services", "serviceaccounts", "resourcequotas",
                          "persistentvolumeclaims", "persistentvolumes"}
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


def owner_uids(obj: dict[str, Any]) -> set[str]:
    return {ref.get("uid") for ref in obj["metadata"].get("ownerReferences") or []}


class Cluster:
    """All server state and the rules for changing it (no HTTP, no authorization checks)."""

    def __init__(self, extensions: tuple[str, ...] | list[str] = (),
                 history_size: int = 10_000) -> None:
        self.registry = Registry(extensions)
        self.store = Store(history_size)
        self.lock = self.store.lock
        self.validator = ObjectValidator()
        self.authn = Authenticator(self.store)
        self.authz = Authorizer(self.store)
        self.quota = QuotaKeeper(self.store)
        self.faults = FaultInjector()
        self.jobs = JobController(self)
        self.logs: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
        self._depth = 0
        self._draining = False
        self._dirty_jobs: set[tuple[str, str]] = set()
        self._dirty_quota_ns: set[str] = set()
        self._next_ip = 10

    def rt(self, key: str) -> ResourceType:
        return self.registry.by_key(key)

    # -- transactions and reactions ------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.lock:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            if self._depth == 0 and not self._draining:
                self._drain()

    def _drain(self) -> None:
        self._draining = True
        try:
            while self._dirty_jobs or self._dirty_quota_ns:
                if self._dirty_jobs:
                    ns, name = self._dirty_jobs.pop()
                    with self.transaction():
                        self.jobs.reconcile(ns, name)
                    continue
                ns = self._dirty_quota_ns.pop()
                with self.transaction():
                    for quota in self.store.list("resourcequotas", ns):
                        status = self.quota.status_for(quota)
                        if quota.get("status") != status:
                            self.write(self.rt("resourcequotas"), dict(quota, status=status))
        finally:
            self._draining = False

    def tick(self) -> None:
        """Time-driven reactions (Job `activeDeadlineSeconds`); the server calls this often."""
        with self.transaction():
            for job in self.store.list("jobs.batch"):
                if self.jobs.deadline_passed(job):
                    self._dirty_jobs.add((job["metadata"]["namespace"], job["metadata"]["name"]))

    def _changed(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        ns = obj["metadata"].get("namespace", "")
        if rt.key == "jobs.batch":
            self._dirty_jobs.add((ns, obj["metadata"]["name"]))
        elif rt.key == "pods":
            for ref in obj["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Job" and ref.get("controller"):
                    self._dirty_jobs.add((ns, ref["name"]))
            if self.store.list("resourcequotas", ns):  # freed quota may unblock other jobs
                for job in self.store.list("jobs.batch", ns):
                    self._dirty_jobs.add((ns, job["metadata"]["name"]))
        if rt.namespaced and rt.key != "events" and self.store.list("resourcequotas", ns):
            self._dirty_quota_ns.add(ns)

    def write(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a complete new version of an object (internal writers: controllers, controls)."""
        with self.transaction():
            stored = self.store.put(rt.key, obj)
            self._changed(rt, stored)
            return stored

    def mutate(self, rt: ResourceType, namespace: str, name: str, change: Any) -> dict[str, Any]:
        """Apply `change(copy)` to the stored object and write it if anything changed."""
        with self.transaction():
            current = self.get(rt, namespace, name)
            new = copy.deepcopy(current)
            change(new)
            return current if new == current else self.write(rt, new)

    # -- reads ---------------------------------------------------------------------------
    def get(self, rt: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def list(self, rt: ResourceType, namespace: str | None, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None,
             continue_token: str | None = None) -> dict[str, Any]:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.kind)
        with self.lock:
            rv = self.store.resource_version
            items = [o for o in self.store.list(rt.key, namespace or None)
                     if labels_match(labels, o) and fields_match(fields, o)]
        if continue_token:
            try:
                start = json.loads(base64.b64decode(continue_token))["start"]
            except (ValueError, KeyError, TypeError) as exc:
                raise bad_request("invalid continue token") from exc
            items = [o for o in items if self._sort_key(o) > tuple(start)]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit and len(items) > limit:
            items = items[:limit]
            token = {"rv": rv, "start": list(self._sort_key(items[-1]))}
            meta["continue"] = base64.b64encode(json.dumps(token).encode()).decode()
        if not rt.group.endswith(("kubeflow.org", "x-k8s.io")):  # built-in lists drop kind
            items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                     for o in items]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta,
                "items": items}

    @staticmethod
    def _sort_key(obj: dict[str, Any]) -> tuple[str, str]:
        return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]

    # -- create --------------------------------------------------------------------------
    def _decode(self, rt: ResourceType, body: Any, namespace: str) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise bad_request(f"Object '{rt.kind}' must be a JSON object")
        obj = copy.deepcopy(body)
        if obj.get("apiVersion", rt.api_version) != rt.api_version or obj.get(
                "kind", rt.kind) != rt.kind:
            raise bad_request(f"the API version in the data ({obj.get('apiVersion')}) or kind "
                              f"({obj.get('kind')}) does not match the expected API version "
                              f"({rt.api_version}) and kind ({rt.kind})")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise invalid(rt.kind, rt.group, "", [{"field": "metadata", "reason":
                                                  "FieldValueTypeInvalid", "message":
                                                  "must be of type object"}])
        if rt.namespaced and meta.get("namespace") not in (None, "", namespace):
            raise bad_request("the namespace of the provided object does not match the "
                              "namespace sent on the request")
        return obj

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        while True:
            name = prefix[:58] + "".join(random.choices(_NAME_CHARS, k=5))
            if self.store.get(rt.key, namespace, name) is None:
                return name

    def _require_namespace(self, namespace: str, rt: ResourceType, name: str) -> None:
        ns = self.store.get("namespaces", "", namespace)
        if ns is None:
            raise not_found("namespaces", "", namespace)
        if ns.get("status", {}).get("phase") == "Terminating":
            raise forbidden(rt.plural, rt.group, name, f"unable to create new content in "
                            f"namespace {namespace} because it is being terminated")

    def allocate_ip(self) -> str:
        self._next_ip += 1
        return f"10.96.{self._next_ip // 250}.{self._next_ip % 250 + 1}"

    def create(self, rt: ResourceType, namespace: str, body: Any, *, user: User | None = None,
               dry_run: bool = False, field_validation: str = "Warn"
               ) -> tuple[dict[str, Any], list[str]]:
        """Admit and store a new object; returns it and any warnings."""
        namespace = namespace if rt.namespaced else ""
        obj = self._decode(rt, body, namespace)
        with self.transaction():
            warnings = self.validator.check_schema(obj, rt.group, field_validation)
            meta = obj["metadata"]
            if meta.get("resourceVersion"):
                raise bad_request("resourceVersion should not be set on objects to be created")
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(rt, namespace, meta["generateName"])
            name = meta.get("name") or ""
            if rt.namespaced:
                meta["namespace"] = namespace
                self._require_namespace(namespace, rt, name)
            else:
                meta.pop("namespace", None)
            for key in _SERVER_META:
                meta.pop(key, None)
            meta["uid"] = defaults.new_uid()
            meta["creationTimestamp"] = defaults.now()
            obj = defaults.apply(rt.kind, obj, self.allocate_ip)
            if "spec" in obj:
                obj["metadata"]["generation"] = 1
            self.validator.check_semantics(obj, rt.group)
            if self.store.get(rt.key, namespace, name) is not None:
                raise already_exists(rt.plural, rt.group, name)
            self._admit(rt, obj, user)
            if dry_run:
                return obj, warnings
            stored = self.write(rt, obj)
            if rt.key == "namespaces":
                self._populate_namespace(name)
            return stored, warnings

    def _admit(self, rt: ResourceType, obj: dict[str, Any], user: User | None) -> None:
        """Admission plugins: RBAC escalation, ServiceAccount existence, ResourceQuota."""
        if user is not None and rt.group == "rbac.authorization.k8s.io":
            if rt.plural in ("roles", "clusterroles"):
                self.authz.check_role_write(user, obj, rt.plural)
            else:
                self.authz.check_binding_write(user, obj, rt.plural)
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        if rt.key == "pods":
            sa = obj["spec"]["serviceAccountName"]
            if self.store.get("serviceaccounts", ns, sa) is None:
                raise forbidden("pods", "", name, f"error looking up service account {ns}/{sa}: "
                                f'serviceaccount "{sa}" not found')
        if rt.namespaced:
            self.quota.admit(rt.key, rt.plural, rt.group, obj)

    def _populate_namespace(self, namespace: str) -> None:
        """What controllers add to every new namespace: the default SA and the CA bundle."""
        for key, body in (("serviceaccounts", {"metadata": {"name": "default"}}),
                          ("configmaps", {"metadata": {"name": "kube-root-ca.crt"},
                                          "data": {"ca.crt": "kubeapi-test-server"}})):
            if self.store.get(key, namespace, body["metadata"]["name"]) is None:
                self.create(self.rt(key), namespace, body)

    # -- update and patch ----------------------------------------------------------------
    def update(self, rt: ResourceType, namespace: str, name: str, body: Any, *,
               subresource: str = "", user: User | None = None, dry_run: bool = False,
               field_validation: str = "Warn") -> tuple[dict[str, Any], list[str]]:
        namespace = namespace if rt.namespaced else ""
        obj = self._decode(rt, body, namespace)
        with self.transaction():
            current = self.get(rt, namespace, name)
            warnings = self.validator.check_schema(obj, rt.group, field_validation)
            meta = obj["metadata"]
            if meta.get("name") != name:
                raise bad_request(f"the name of the object ({meta.get('name')}) does not match "
                                  f"the name on the URL ({name})")
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise conflict(rt.plural, rt.group, name)
            new = self._merge_update(rt, current, obj, subresource)
            self._check_immutable(rt, current, new)
            self.validator.check_semantics(new, rt.group)
            if user is not None and rt.group == "rbac.authorization.k8s.io":
                self._admit(rt, new, user)
            if dry_run or self._same(current, new):
                return (new if dry_run else current), warnings
            if new.get("spec") != current.get("spec") and "generation" in current["metadata"]:
                new["metadata"]["generation"] = current["metadata"]["generation"] + 1
            return self.write(rt, new), warnings

    @staticmethod
    def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
        strip = lambda o: dict(o, metadata={k: v for k, v in o["metadata"].items()  # noqa: E731
                                            if k != "resourceVersion"})
        return strip(a) == strip(b)

    def _merge_update(self, rt: ResourceType, current: dict[str, Any], obj: dict[str, Any],
                      subresource: str) -> dict[str, Any]:
        """The object to store: server-owned fields from `current`, the rest from `obj`.

        The body is defaulted like a new object (so a client may PUT what it originally
        sent), then the status (or, for `/status`, everything but the status) is kept.
        """
        if subresource == "status":
            return dict(copy.deepcopy(current), status=obj.get("status") or {})
        keep = {k: current["metadata"][k] for k in _SERVER_META if k in current["metadata"]}
        obj["metadata"] = dict(obj["metadata"], **keep)
        if rt.namespaced:
            obj["metadata"]["namespace"] = current["metadata"]["namespace"]
        cluster_ip = (current.get("spec") or {}).get("clusterIP")
        new = defaults.apply(rt.kind, obj, lambda: cluster_ip)
        if rt.has_status or "status" in current:
            new["status"] = copy.deepcopy(current.get("status"))
            if new["status"] is None:
                del new["status"]
        if rt.key == "namespaces":
            new["spec"] = current.get("spec")
        return new

    @staticmethod
    def _check_immutable(rt: ResourceType, current: dict[str, Any], new: dict[str, Any]) -> None:
        name = current["metadata"]["name"]
        if rt.key == "pods":
            allowed = ("containers", "initContainers", "activeDeadlineSeconds", "tolerations")
            old_spec = {k: v for k, v in current["spec"].items() if k not in allowed}
            new_spec = {k: v for k, v in new["spec"].items() if k not in allowed}
            strip = lambda cs: [{k: v for k, v in c.items() if k != "image"}  # noqa: E731
                                for c in cs or []]
            if old_spec != new_spec or any(strip(current["spec"].get(k)) != strip(
                    new["spec"].get(k)) for k in ("containers", "initContainers")):
                raise invalid("Pod", "", name, [{
                    "field": "spec", "reason": "FieldValueForbidden",
                    "message": "Forbidden: pod updates may not change fields other than "
                               "`spec.containers[*].image`,`spec.initContainers[*].image`,"
                               "`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                               "additions to existing tolerations)"}])
        if rt.key == "jobs.batch":
            old, cur = current["spec"], new.get("spec") or {}
            suspended = old.get("suspend") and not current.get("status", {}).get("startTime")
            fields = ["selector", "completionMode"] + ([] if suspended else ["template"])
            for field in fields + ["completions"]:
                if old.get(field) != cur.get(field):
                    raise invalid("Job", "batch", name, [{
                        "field": f"spec.{field}", "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {json.dumps(cur.get(field))[:200]}: field "
                                   "is immutable"}])
        if rt.kind in ("RoleBinding", "ClusterRoleBinding") and (
                current.get("roleRef") != new.get("roleRef")):
            raise invalid(rt.kind, rt.group, name, [{
                "field": "roleRef", "reason": "FieldValueInvalid",
                "message": f"Invalid value: {json.dumps(new.get('roleRef'))}: cannot change "
                           "roleRef"}])

    def patch(self, rt: ResourceType, namespace: str, name: str, content_type: str, body: Any,
              **kwargs: Any) -> tuple[dict[str, Any], list[str]]:
        with self.transaction():
            current = self.get(rt, namespace, name)
            patched = patch.apply(content_type, copy.deepcopy(current), body)
            return self.update(rt, namespace, name, patched, **kwargs)

    # -- delete --------------------------------------------------------------------------
    def delete(self, rt: ResourceType, namespace: str, name: str, *,
               propagation: str | None = None, preconditions: dict[str, Any] | None = None,
               dry_run: bool = False) -> dict[str, Any]:
        """Delete now (grace periods are not modelled); returns the API's response body."""
        namespace = namespace if rt.namespaced else ""
        with self.transaction():
            current = self.get(rt, namespace, name)
            for field in ("uid", "resourceVersion"):
                wanted = (preconditions or {}).get(field)
                if wanted and wanted != current["metadata"][field]:
                    raise ApiError(409, f'Operation cannot be fulfilled on {rt.key} "{name}": '
                                   f"Precondition failed: {field} in precondition: {wanted}, "
                                   f"{field} in object meta: {current['metadata'][field]}",
                                   "Conflict")
            if propagation not in (None, "Orphan", "Background", "Foreground"):
                raise bad_request(f"propagationPolicy: Unsupported value: {propagation!r}")
            if dry_run:
                return current
            # batch/v1 Jobs orphan their pods unless told otherwise, like the real API.
            policy = propagation or ("Orphan" if rt.key == "jobs.batch" else "Background")
            if rt.key == "namespaces":
                self._delete_contents(name)
            self._cascade(current, policy)
            last = self._remove(rt, current)
        stamp = defaults.now()
        if rt.key in _DELETE_RETURNS_OBJECT or rt.extension:
            meta = dict(last["metadata"], deletionTimestamp=stamp)
            if rt.key == "namespaces":
                return dict(last, metadata=meta, status={"phase": "Terminating"})
            return dict(last, metadata=dict(meta, deletionGracePeriodSeconds=0))
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": name, "group": rt.group, "kind": rt.plural,
                            "uid": current["metadata"]["uid"]}}

    def _remove(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        last = self.store.remove(rt.key, ns, name)
        if last is None:  # already removed by a cascade
            return obj
        if rt.key == "pods":
            for key in [k for k in self.logs if k[:2] == (ns, name)]:
                del self.logs[key]
        self._changed(rt, last)
        return last

    def _cascade(self, owner: dict[str, Any], policy: str) -> None:
        uid = owner["metadata"]["uid"]
        for key, obj in list(self.store.all_objects()):
            if uid not in owner_uids(obj):
                continue
            dependent_rt = self.rt(key)
            if policy == "Orphan":
                refs = [r for r in obj["metadata"]["ownerReferences"] if r.get("uid") != uid]
                meta = dict(obj["metadata"], ownerReferences=refs)
                if not refs:
                    del meta["ownerReferences"]
                self.write(dependent_rt, dict(obj, metadata=meta))
            else:
                self._cascade(obj, "Background")
                self._remove(dependent_rt, obj)

    def _delete_contents(self, namespace: str) -> None:
        self.mutate(self.rt("namespaces"), "", namespace,
                    lambda ns: ns["status"].update(phase="Terminating"))
        for rt in self.registry.types:
            if rt.namespaced:
                for obj in self.store.list(rt.key, namespace):
                    self._remove(rt, obj)

    def delete_collection(self, rt: ResourceType, namespace: str, label_selector: str | None,
                          field_selector: str | None, propagation: str | None = None
                          ) -> dict[str, Any]:
        with self.transaction():
            listed = self.list(rt, namespace, label_selector, field_selector)
            for item in listed["items"]:
                meta = item["metadata"]
                self.delete(rt, meta.get("namespace", ""), meta["name"], propagation=propagation)
        return listed

    # -- events --------------------------------------------------------------------------
    def record_event(self, obj: dict[str, Any], reason: str, message: str,
                     type_: str = "Normal", component: str = "kubeapi") -> dict[str, Any]:
        """Create a core/v1 Event about `obj`, as controllers and the kubelet do."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        stamp = defaults.now()
        suffix = "".join(random.choices(string.hexdigits.lower()[:16], k=16))
        event = {
            "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": namespace},
            "involvedObject": {"kind": obj.get("kind"), "namespace": meta.get("namespace"),
                               "name": meta["name"], "uid": meta.get("uid"),
                               "apiVersion": obj.get("apiVersion"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": type_,
            "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "count": 1, "reportingComponent": component, "reportingInstance": "",
        }
        if self.store.get("namespaces", "", namespace) is None:
            return event
        return self.create(self.rt("events"), namespace, event)[0]
