"""The DRA devices live pods hold, by catalog type and owner, for the hub's GPU metrics.

A pod that gets its GPUs through Dynamic Resource Allocation requests no `nvidia.com/...`
resource: it holds the devices allocated to its ResourceClaims (`status.allocation.devices.results`).
A claim counts when a live pod bound to a node references it (`spec.resourceClaims` by name, or
the name the resourceclaim controller gave a template's claim in `status.resourceClaimStatuses`)
and the claim is reserved for that very pod (`status.reservedFor`, by uid, which the scheduler
writes): a claim no pod of its namespace uses counts for nobody, whatever it says of itself.
A pod can only reference claims in its own namespace, so the owner is the pod's (its user
namespace, as the hub wrote it; never labels a user can set), and each claim counts once however
many pods share it. A device's type is the catalog's DRA type whose class and selector accept it
(dra_availability.Membership); a device no type accepts is not a catalog GPU and is not counted,
nor is a device allocated for admin access (a monitoring tool's, which holds nothing).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .dra_availability import DraCount, Key

_DONE = ("Succeeded", "Failed")


@dataclass(frozen=True)
class DraState:
    """What the hub's DRA mirrors say at one scrape."""

    claims: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # "namespace/name" -> claim
    type_of: Mapping[Key, str] = field(default_factory=dict)  # device -> catalog DRA type
    counts: Mapping[str, DraCount] = field(default_factory=dict)  # per DRA type: total and free


def claim_names(pod: dict[str, Any]) -> set[str]:
    """The ResourceClaims a pod references, in its own namespace."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    named = {c.get("resourceClaimName") for c in spec.get("resourceClaims") or []}
    made = {c.get("resourceClaimName") for c in status.get("resourceClaimStatuses") or []}
    return {name for name in named | made if name}


def _reserved_for(claim: dict[str, Any], uid: str) -> bool:
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    return bool(uid) and any(r.get("resource") == "pods" and r.get("uid") == uid for r in reserved)


def held(
    pods: Iterable[dict[str, Any]],
    state: DraState,
    owner: Callable[[dict[str, Any]], tuple[str, str]],
) -> Counter[tuple[str, str, str]]:
    """DRA devices held by live pods bound to a node, by (type, group, user); `owner` gives a
    pod's (user, group) as the hub trusts it."""
    result: Counter[tuple[str, str, str]] = Counter()
    if not state.claims:
        return result
    counted: set[str] = set()
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (pod.get("status") or {}).get("phase") in _DONE or meta.get("deletionTimestamp"):
            continue
        if not spec.get("nodeName"):
            continue
        for name in claim_names(pod):
            key = f"{meta.get('namespace', '')}/{name}"
            claim = state.claims.get(key)
            if claim is None or key in counted or not _reserved_for(claim, meta.get("uid", "")):
                continue
            counted.add(key)
            user, group = owner(pod)
            for device in _devices(claim):
                gpu_type = state.type_of.get(device)
                if gpu_type is not None:
                    result[(gpu_type, group, user)] += 1
    return result


def _devices(claim: dict[str, Any]) -> list[Key]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return [
        (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
        for r in (allocation.get("devices") or {}).get("results") or []
        if not r.get("adminAccess")
    ]
