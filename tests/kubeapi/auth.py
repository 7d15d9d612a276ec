"""Bearer-token authentication and RBAC authorization from the Roles and bindings in the store.

The rules match the real RBAC authorizer: verbs and apiGroups with `*`, resources with `*`,
`pods/log` and `*/log`, and `resourceNames`. Like the API server, creating a Role or binding
checks for privilege escalation (you can only grant what you hold, unless you may `escalate`
or `bind`).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from itertools import product
from typing import Any

from .errors import ApiError, forbidden
from .store import Store

RBAC = "rbac.authorization.k8s.io"
ADMIN_USER = "kubeapi:admin"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return "system:masters" in self.groups

    @property
    def service_account(self) -> tuple[str, str] | None:
        parts = self.name.split(":")
        if len(parts) == 4 and parts[:2] == ["system", "serviceaccount"]:
            return parts[2], parts[3]
        return None


@dataclass(frozen=True)
class Attributes:
    """What a request wants to do, in RBAC's vocabulary."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""


class Authenticator:
    """Maps bearer tokens to users: one admin token, plus tokens issued on demand."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.admin_token = "admin-" + secrets.token_hex(16)
        self._tokens: dict[str, User] = {
            self.admin_token: User(ADMIN_USER, ("system:masters", "system:authenticated"))}

    def issue_for_service_account(self, namespace: str, name: str) -> str:
        token = f"sa-{namespace}-{name}-{secrets.token_hex(12)}"
        self._tokens[token] = User(
            f"system:serviceaccount:{namespace}:{name}",
            ("system:serviceaccounts", f"system:serviceaccounts:{namespace}",
             "system:authenticated"))
        return token

    def issue_for_user(self, name: str, groups: tuple[str, ...] | list[str] = ()) -> str:
        token = f"user-{secrets.token_hex(12)}"
        self._tokens[token] = User(name, (*groups, "system:authenticated"))
        return token

    def authenticate(self, authorization: str | None) -> User:
        """The user behind an `Authorization: Bearer ...` header, else 401."""
        scheme, _, token = (authorization or "").partition(" ")
        user = self._tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if user is not None and user.service_account is not None:
            ns, sa = user.service_account
            if self.store.get("serviceaccounts", ns, sa) is None:
                user = None  # tokens die with their ServiceAccount
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        return user


def _matches(values: list[str] | None, wanted: str) -> bool:
    values = values or []
    return "*" in values or wanted in values


def _resource_matches(rule_resources: list[str] | None, resource: str, sub: str) -> bool:
    for rule in rule_resources or []:
        if rule in ("*", f"{resource}/{sub}" if sub else resource):
            return True
        if sub and rule == f"*/{sub}":
            return True
    return False


def rule_allows(rule: dict[str, Any], attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs"), attrs.verb):
        return False
    if not _matches(rule.get("apiGroups"), attrs.group):
        return False
    if not _resource_matches(rule.get("resources"), attrs.resource, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject_matches(subject: dict[str, Any], user: User, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        sa = user.service_account
        return sa == (subject.get("namespace") or binding_ns, subject.get("name"))
    return False


class Authorizer:
    """Decides requests from the RBAC objects currently in the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _roles_for(self, user: User, namespace: str) -> list[dict[str, Any]]:
        roles = []
        for crb in self.store.list("clusterrolebindings.rbac.authorization.k8s.io"):
            if any(_subject_matches(s, user, "") for s in crb.get("subjects") or []):
                role = self.store.get("clusterroles.rbac.authorization.k8s.io", "",
                                      crb["roleRef"]["name"])
                if role:
                    roles.append(role)
        if namespace:
            for rb in self.store.list("rolebindings.rbac.authorization.k8s.io", namespace):
                if any(_subject_matches(s, user, namespace) for s in rb.get("subjects") or []):
                    ref = rb["roleRef"]
                    if ref["kind"] == "Role":
                        role = self.store.get("roles.rbac.authorization.k8s.io", namespace,
                                              ref["name"])
                    else:
                        role = self.store.get("clusterroles.rbac.authorization.k8s.io", "",
                                              ref["name"])
                    if role:
                        roles.append(role)
        return roles

    def allowed(self, user: User, attrs: Attributes) -> bool:
        if user.is_admin:
            return True
        return any(rule_allows(rule, attrs)
                   for role in self._roles_for(user, attrs.namespace)
                   for rule in role.get("rules") or [])

    def check(self, user: User, attrs: Attributes) -> None:
        """Raise the API server's 403 unless `user` may do `attrs`."""
        if self.allowed(user, attrs):
            return
        resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else (
            attrs.resource)
        where = (f'in the namespace "{attrs.namespace}"' if attrs.namespace
                 else "at the cluster scope")
        raise forbidden(attrs.resource, attrs.group, attrs.name or None,
                        f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API '
                        f'group "{attrs.group}" {where}')

    # -- privilege escalation ------------------------------------------------------------
    def _missing(self, user: User, rules: list[dict[str, Any]], namespace: str) -> list[str]:
        missing = []
        for rule in rules:
            if rule.get("nonResourceURLs"):
                continue
            combos = product(rule.get("apiGroups") or [""], rule.get("resources") or [],
                             rule.get("verbs") or [], rule.get("resourceNames") or [""])
            for group, res, verb, name in combos:
                resource, _, sub = res.partition("/")
                if not self.allowed(user, Attributes(verb, group, resource, sub, namespace,
                                                     name)):
                    missing.append(f"{{APIGroups:[{json.dumps(group)}], Resources:"
                                   f"[{json.dumps(res)}], Verbs:[{json.dumps(verb)}]}}")
        return missing

    def check_role_write(self, user: User, role: dict[str, Any], plural: str) -> None:
        namespace = role["metadata"].get("namespace", "")
        name = role["metadata"]["name"]
        if user.is_admin or self.allowed(user, Attributes("escalate", RBAC, plural, "",
                                                          namespace, name)):
            return
        missing = self._missing(user, role.get("rules") or [], namespace)
        if missing:
            self._escalation(user, plural, name, missing)

    def check_binding_write(self, user: User, binding: dict[str, Any], plural: str) -> None:
        namespace = binding["metadata"].get("namespace", "")
        ref = binding.get("roleRef") or {}
        ref_plural = "roles" if ref.get("kind") == "Role" else "clusterroles"
        if user.is_admin or self.allowed(user, Attributes("bind", RBAC, ref_plural, "",
                                                          namespace, ref.get("name", ""))):
            return
        role = (self.store.get(f"{ref_plural}.{RBAC}", namespace if ref_plural == "roles"
                               else "", ref.get("name", "")) or {})
        missing = self._missing(user, role.get("rules") or [], namespace)
        if missing:
            self._escalation(user, plural, binding["metadata"]["name"], missing)

    @staticmethod
    def _escalation(user: User, plural: str, name: str, missing: list[str]) -> None:
        groups = " ".join(json.dumps(g) for g in user.groups)
        raise forbidden(plural, RBAC, name,
                        f'user "{user.name}" (groups=[{groups}]) is attempting to grant RBAC '
                        "permissions not currently held:\n" + "\n".join(missing))
