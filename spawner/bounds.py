"""What one user namespace may hold besides GPUs, CPU and memory: object counts, storage, the
size of each container and of each ephemeral volume, and how often a schedule may fire.

A namespace without such bounds lets one user exhaust what everyone shares: a Job with
parallelism 222 fills two nodes' pod slots, a generic ephemeral volume asks for `100Ti`,
a loop creates ServiceAccounts by the hundred. The API server enforces each bound: the
ResourceQuota (counts, storage), the LimitRange (per container) and the admission policy's
parameters (`kubelab.spawner.admission_policy`). Defaults below; an admin changes them for the
lab (`KubeLabSpawner.namespace_bounds`) and per group (the group property `namespace_bounds`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.quantity import parse_quantity


@dataclass(frozen=True)
class NamespaceBounds:
    # ResourceQuota object counts (pods and services count live objects; jobs finished ones too)
    pods: int = 50
    services: int = 20
    persistentvolumeclaims: int = 10
    configmaps: int = 20
    secrets: int = 20
    serviceaccounts: int = 20
    cronjobs: int = 10
    jobs: int = 500
    deployments: int = 10  # served services: a Deployment and an autoscaler per version
    horizontalpodautoscalers: int = 10
    inferenceservices: int = 10  # KServe's, where the cluster serves them
    httproutes: int = 10
    # claims' storage together; None: the workspace and archive plus two ephemeral volumes
    storage: str | None = None
    ephemeral_storage: str = "200Gi"  # containers' scratch space requested together
    ephemeral_volume: str = "100Gi"  # each generic ephemeral volume of a pod
    # LimitRange, per container: requests below the minimum and limits above the maximum are refused
    min_cpu: str = "50m"
    min_memory: str = "32Mi"
    max_cpu: str = "64"
    max_memory: str = "512Gi"
    default_cpu: str = "2"  # the limit of a container that sets none
    default_memory: str = "4Gi"
    default_request_cpu: str = "500m"  # the request of a container that sets none
    default_request_memory: str = "1Gi"
    default_ephemeral_storage: str = "20Gi"  # a container writing more is evicted by its kubelet
    default_request_ephemeral_storage: str = "1Gi"
    cpu_ratio: int = 10  # limit / request at most (kubelab's schedule pods use 10 for CPU)
    memory_ratio: int = 4
    schedule_minutes: int = 5  # a CronJob fires at most once per this many minutes (1-60)


# bound -> the ResourceQuota's name for it
COUNTS = {
    "pods": "pods",
    "services": "services",
    "persistentvolumeclaims": "persistentvolumeclaims",
    "configmaps": "configmaps",
    "secrets": "secrets",
    "serviceaccounts": "count/serviceaccounts",
    "cronjobs": "count/cronjobs.batch",
    "jobs": "count/jobs.batch",
    "deployments": "count/deployments.apps",
    "horizontalpodautoscalers": "count/horizontalpodautoscalers.autoscaling",
    "inferenceservices": "count/inferenceservices.serving.kserve.io",
    "httproutes": "count/httproutes.gateway.networking.k8s.io",
}
INTEGERS = (*COUNTS, "cpu_ratio", "memory_ratio", "schedule_minutes")
KEYS = tuple(f.name for f in dataclasses.fields(NamespaceBounds))


def parse_bounds(
    value: Any, where: str, base: NamespaceBounds | None = None, *, whole: bool = True
) -> NamespaceBounds:
    """`base` (the defaults) with the keys of `value` replaced; a ValidationError names each bad key
    as `<where>.<key>` and changes nothing. `whole`: also check the defaults fit the LimitRange
    (a group's part is checked once merged with the lab's)."""
    base = base or NamespaceBounds()
    if value in (None, {}):
        return base
    if not isinstance(value, Mapping):
        raise ValidationError(
            "invalid namespace bounds", [FieldError(where, f"must be a mapping of bounds, not {value!r}")]
        )
    errors: list[FieldError] = []
    changes: dict[str, Any] = {}
    for key, raw in value.items():
        path = f"{where}.{key}"
        if key not in KEYS:
            reason = "unknown bound" + did_you_mean(str(key), KEYS) + f" (bounds: {', '.join(KEYS)})"
            errors.append(FieldError(path, reason))
        elif key in INTEGERS:
            low = 1 if key in ("cpu_ratio", "memory_ratio", "schedule_minutes") else 0
            high = 60 if key == "schedule_minutes" else 1_000_000
            if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
                errors.append(FieldError(path, f"must be a whole number from {low} to {high}, not {raw!r}"))
            else:
                changes[key] = raw
        elif raw is None and key == "storage":
            changes[key] = None
        else:
            try:
                if parse_quantity(raw) <= 0:
                    raise ValueError(f"must be more than 0, not {raw!r}")
                changes[key] = str(raw)
            except ValueError as exc:
                errors.append(FieldError(path, str(exc)))
    if errors:
        raise ValidationError("invalid namespace bounds", errors)
    bounds = dataclasses.replace(base, **changes)
    if whole:
        _check_consistent(bounds, where)
    return bounds


def _check_consistent(bounds: NamespaceBounds, where: str) -> None:
    """Defaults the LimitRange would refuse make every pod that relies on them fail: say so now."""
    errors = []
    for resource in ("cpu", "memory"):
        low, high = (parse_quantity(getattr(bounds, f"{k}_{resource}")) for k in ("min", "max"))
        request = parse_quantity(getattr(bounds, f"default_request_{resource}"))
        limit = parse_quantity(getattr(bounds, f"default_{resource}"))
        ratio = getattr(bounds, f"{resource}_ratio")
        if not low <= request <= limit <= high:
            errors.append(
                FieldError(
                    f"{where}.default_{resource}",
                    f"needs min_{resource} <= default_request_{resource} <= default_{resource} "
                    f"<= max_{resource}",
                )
            )
        elif limit > request * ratio:
            errors.append(
                FieldError(
                    f"{where}.{resource}_ratio",
                    f"default_{resource} / default_request_{resource} is over {ratio}",
                )
            )
    if parse_quantity(bounds.default_request_ephemeral_storage) > parse_quantity(
        bounds.default_ephemeral_storage
    ):
        errors.append(
            FieldError(f"{where}.default_ephemeral_storage", "is below default_request_ephemeral_storage")
        )
    if errors:
        raise ValidationError("invalid namespace bounds", errors)


def claims_storage(bounds: NamespaceBounds, claim_sizes: list[str]) -> str:
    """The namespace's `requests.storage`: as set, or its claims plus two ephemeral volumes."""
    if bounds.storage is not None:
        return bounds.storage
    total = int(sum((parse_quantity(s) for s in claim_sizes), parse_quantity(bounds.ephemeral_volume) * 2))
    return f"{total // 2**30}Gi" if total % 2**30 == 0 else str(total)


def group_bounds(lab: Mapping[str, Any], group: str, overrides: Mapping[str, Any]) -> NamespaceBounds:
    """The lab's bounds (`KubeLabSpawner.namespace_bounds`) with a group's overrides."""
    base = parse_bounds(dict(lab), "KubeLabSpawner.namespace_bounds")
    return parse_bounds(dict(overrides), f"groups.{group}.namespace_bounds", base)
