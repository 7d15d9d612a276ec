"""ResourceQuota admission and usage, with the API server's `exceeded quota` messages."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from .errors import forbidden

_ALIASES = {"cpu": "requests.cpu", "memory": "requests.memory",
            "ephemeral-storage": "requests.ephemeral-storage"}
_LEGACY_COUNTS = {"services", "secrets", "configmaps", "persistentvolumeclaims",
                  "resourcequotas", "replicationcontrollers"}
_MUST_SPECIFY = ("requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
TERMINAL = ("Succeeded", "Failed")


def _container_amounts(ctr: dict[str, Any]) -> dict[str, Decimal]:
    res = ctr.get("resources") or {}
    out: dict[str, Decimal] = {}
    for section in ("requests", "limits"):
        for name, value in (res.get(section) or {}).items():
            out[f"{section}.{name}"] = parse_quantity(value)
    return out


def pod_amounts(pod: dict[str, Any]) -> dict[str, Decimal]:
    """What a pod consumes: the sum over containers, at least the largest init container."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for ctr in spec.get("containers") or []:
        for key, value in _container_amounts(ctr).items():
            total[key] = total.get(key, Decimal(0)) + value
    for ctr in spec.get("initContainers") or []:
        for key, value in _container_amounts(ctr).items():
            total[key] = max(total.get(key, Decimal(0)), value)
    return total


def usage(resource_key: str, obj: dict[str, Any], hard_key: str) -> Decimal:
    """How much of quota item `hard_key` one object uses."""
    plural, _, group = resource_key.partition(".")
    if hard_key in (f"count/{resource_key}", f"count/{plural}") and (
            not group or hard_key == f"count/{resource_key}"):
        return Decimal(1)
    if plural == "pods":
        if (obj.get("status") or {}).get("phase") in TERMINAL:
            return Decimal(0)
        if hard_key == "pods":
            return Decimal(1)
        return pod_amounts(obj).get(_ALIASES.get(hard_key, hard_key), Decimal(0))
    if hard_key == plural and plural in _LEGACY_COUNTS:
        return Decimal(1)
    if plural == "persistentvolumeclaims" and hard_key == "requests.storage":
        storage = (((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get(
            "storage", 0)
        return parse_quantity(storage)
    return Decimal(0)


def format_quantity(value: Decimal, key: str) -> str:
    """Render like resource.Quantity: `2`, `500m`, `1Gi`."""
    if value == value.to_integral_value():
        number = int(value)
        if any(word in key for word in ("memory", "storage")) and number:
            for suffix, factor in (("Ti", 1024**4), ("Gi", 1024**3), ("Mi", 1024**2),
                                   ("Ki", 1024)):
                if number % factor == 0:
                    return f"{number // factor}{suffix}"
        return str(number)
    return f"{int(value * 1000)}m"


def _pretty(values: dict[str, Decimal]) -> str:
    return ",".join(f"{k}={format_quantity(v, k)}" for k, v in sorted(values.items()))


class QuotaKeeper:
    """Checks creations against the quotas of their namespace and computes `status.used`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _used(self, namespace: str, hard: dict[str, Any]) -> dict[str, Decimal]:
        used = {key: Decimal(0) for key in hard}
        for resource_key, obj in self.store.all_objects():
            if obj["metadata"].get("namespace") != namespace:
                continue
            for key in hard:
                used[key] += usage(resource_key, obj, key)
        return used

    def admit(self, resource_key: str, plural: str, group: str, obj: dict[str, Any]) -> None:
        """Raise 403 `exceeded quota` / `failed quota` if creating `obj` breaks a quota."""
        namespace = obj["metadata"].get("namespace", "")
        name = obj["metadata"]["name"]
        for quota in self.store.list("resourcequotas", namespace):
            hard = (quota.get("spec") or {}).get("hard") or {}
            qname = quota["metadata"]["name"]
            if plural == "pods":
                self._must_specify(obj, hard, qname, name)
            requested = {k: usage(resource_key, obj, k) for k in hard}
            requested = {k: v for k, v in requested.items() if v}
            if not requested:
                continue
            used = self._used(namespace, {k: hard[k] for k in requested})
            limits = {k: parse_quantity(hard[k]) for k in requested}
            over = [k for k in requested if used[k] + requested[k] > limits[k]]
            if over:
                raise forbidden(plural, group, name,
                                f"exceeded quota: {qname}, requested: "
                                f"{_pretty({k: requested[k] for k in over})}, used: "
                                f"{_pretty({k: used[k] for k in over})}, limited: "
                                f"{_pretty({k: limits[k] for k in over})}")

    @staticmethod
    def _must_specify(pod: dict[str, Any], hard: dict[str, Any], qname: str, name: str) -> None:
        constrained = sorted({_ALIASES.get(k, k) for k in hard} & set(_MUST_SPECIFY))
        missing = []
        for key in constrained:
            section, resource = key.split(".", 1)
            ctrs = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []
                    if resource not in ((c.get("resources") or {}).get(section) or {})]
            if ctrs:
                missing.append(f"{key} for: {','.join(ctrs)}")
        if missing:
            raise forbidden("pods", "", name, f"failed quota: {qname}: must specify "
                            + "; ".join(missing))

    def status_for(self, quota: dict[str, Any]) -> dict[str, Any]:
        """The `status` a quota should have now (hard copied from spec, used recounted)."""
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        used = self._used(quota["metadata"]["namespace"], hard)
        return {"hard": hard, "used": {k: format_quantity(v, k) for k, v in used.items()}}

