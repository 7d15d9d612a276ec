"""Project groups: JupyterHub groups whose admin-set properties shape a user's notebook.

Properties (all optional), as an admin sets them through the hub's API or admin page:

    {"node_selector": {"org": "public"} | "org=public,zone=a",
     "volume_mount": "kubeflow-user-workspace(pvc):/mnt/;4G(memory):/dev/shm",
     "quota": {"user": {"gpus": 2, "cpu": "16", "memory": "64Gi"},
               "group": {"gpus": 8}},
     "cluster": "kubeconfig-context",
     "images": ["registry/lab/pytorch:2.4"],
     "namespace_bounds": {"pods": 100, "ephemeral_volume": "500Gi"},
     "gpu_idle": {"threshold": 5, "minutes": 30, "warn_minutes": 5},
     "max_priority": "normal"}

Keys with a `.` or `/` (`example.org/x`) belong to other hub services and are left alone;
any other unknown key is refused with a suggestion, since a typo would silently drop a quota.
Everyone is in `public`; a user in several groups picks one in the form.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.priorities import PRIORITY_NAMES
from kubelab.quantity import parse_quantity

from .bounds import parse_bounds
from .gpu_idleness import parse_idle_policy
from .volumes import VolumeMount, parse_volume_mount

PUBLIC = "public"
PROPERTY_KEYS = (
    "node_selector",
    "volume_mount",
    "quota",
    "cluster",
    "images",
    "namespace_bounds",
    "gpu_idle",
    "max_priority",
)
QUOTA_KEYS = ("gpus", "cpu", "memory")


@dataclass(frozen=True)
class Quota:
    """Limits on what is held at once; None means no limit."""

    gpus: int | None = None
    cpu: str | None = None
    memory: str | None = None

    def amount(self, key: str) -> Decimal | None:
        value = getattr(self, key)
        return None if value is None else parse_quantity(value)

    def is_empty(self) -> bool:
        return self.gpus is None and self.cpu is None and self.memory is None


@dataclass(frozen=True)
class ProjectGroup:
    name: str
    node_selector: dict[str, str] = field(default_factory=dict)
    volume_mounts: tuple[VolumeMount, ...] = ()
    user_quota: Quota = Quota()
    group_quota: Quota = Quota()
    cluster: str | None = None
    images: tuple[str, ...] = ()
    bounds: dict[str, Any] = field(default_factory=dict)  # over KubeLabSpawner.namespace_bounds
    max_priority: str | None = None  # the highest run priority members may ask for


def parse_group(name: str, properties: Mapping[str, Any] | None) -> ProjectGroup:
    """A ProjectGroup from a JupyterHub group's properties, or a ValidationError naming each
    bad property as `groups.<name>.<key>`."""
    where = f"groups.{name}"
    if properties is None:
        properties = {}
    if not isinstance(properties, Mapping):
        raise ValidationError(
            f"invalid properties of group '{name}'",
            [FieldError(where, f"must be a mapping, not {type(properties).__name__}")],
        )
    errors: list[FieldError] = []
    for key in properties:
        if key not in PROPERTY_KEYS and "." not in key and "/" not in key:
            errors.append(
                FieldError(
                    f"{where}.{key}",
                    "unknown property"
                    + did_you_mean(key, PROPERTY_KEYS)
                    + f" (properties: {', '.join(PROPERTY_KEYS)})",
                )
            )
    selector = _node_selector(properties.get("node_selector"), f"{where}.node_selector", errors)
    mounts: tuple[VolumeMount, ...] = ()
    if properties.get("volume_mount") not in (None, ""):
        try:
            mounts = tuple(parse_volume_mount(properties["volume_mount"], f"{where}.volume_mount"))
        except ValidationError as exc:
            errors += exc.fields
    user_quota, group_quota = _quotas(properties.get("quota"), f"{where}.quota", errors)
    cluster = properties.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or not cluster.strip()):
        errors.append(FieldError(f"{where}.cluster", f"must be a kubeconfig context name, not {cluster!r}"))
        cluster = None
    images = properties.get("images") or []
    if not isinstance(images, list) or not all(isinstance(i, str) and i for i in images):
        errors.append(FieldError(f"{where}.images", f"must be a list of image names, not {images!r}"))
        images = []
    bounds = properties.get("namespace_bounds") or {}
    try:
        parse_bounds(bounds, f"{where}.namespace_bounds", whole=False)
    except ValidationError as exc:
        errors += exc.fields
        bounds = {}
    try:  # read by the GPU culler (a hub service); refused here so a typo is seen at once
        parse_idle_policy(properties.get("gpu_idle"), f"{where}.gpu_idle")
    except ValidationError as exc:
        errors += exc.fields
    max_priority = properties.get("max_priority")
    if max_priority is not None and max_priority not in PRIORITY_NAMES:
        reason = f"must be low, normal or high, not {max_priority!r}"
        errors.append(FieldError(f"{where}.max_priority", reason))
        max_priority = None
    if errors:
        raise ValidationError(f"invalid properties of group '{name}'", errors)
    return ProjectGroup(
        name=name,
        node_selector=selector,
        volume_mounts=mounts,
        user_quota=user_quota,
        group_quota=group_quota,
        cluster=cluster or None,
        images=tuple(images),
        bounds=dict(bounds),
        max_priority=max_priority,
    )


def _node_selector(value: Any, path: str, errors: list[FieldError]) -> dict[str, str]:
    if value in (None, ""):
        return {}
    if isinstance(value, str):  # cube-studio writes `org=public,cpu=true`
        pairs = {}
        for part in value.replace(";", ",").split(","):
            key, sep, val = part.strip().partition("=")
            if not part.strip():
                continue
            if not sep or not key.strip():
                errors.append(FieldError(path, f"'{part.strip()}' must be KEY=VALUE"))
                continue
            pairs[key.strip()] = val.strip()
        return pairs
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return dict(value)
    errors.append(FieldError(path, f"must be a mapping of label to value or 'key=value,...', not {value!r}"))
    return {}


def _quotas(value: Any, path: str, errors: list[FieldError]) -> tuple[Quota, Quota]:
    if value is None:
        return Quota(), Quota()
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, f"must be a mapping with 'user' and/or 'group', not {value!r}"))
        return Quota(), Quota()
    for key in value:
        if key not in ("user", "group"):
            errors.append(
                FieldError(
                    f"{path}.{key}",
                    "unknown quota scope" + did_you_mean(key, ("user", "group")) + " (scopes: user, group)",
                )
            )
    return _quota(value.get("user"), f"{path}.user", errors), _quota(
        value.get("group"), f"{path}.group", errors
    )


def _quota(value: Any, path: str, errors: list[FieldError]) -> Quota:
    if value is None:
        return Quota()
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, f"must be a mapping of gpus, cpu and memory, not {value!r}"))
        return Quota()
    for key in value:
        if key not in QUOTA_KEYS:
            errors.append(
                FieldError(
                    f"{path}.{key}",
                    "unknown quota" + did_you_mean(key, QUOTA_KEYS) + " (quotas: gpus, cpu, memory)",
                )
            )
    gpus = value.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0):
        errors.append(FieldError(f"{path}.gpus", f"must be a whole number >= 0, not {gpus!r}"))
        gpus = None
    amounts: dict[str, str | None] = {}
    for key in ("cpu", "memory"):
        raw = value.get(key)
        amounts[key] = None
        if raw is None:
            continue
        try:
            parse_quantity(raw)
            amounts[key] = str(raw)
        except ValueError as exc:
            errors.append(FieldError(f"{path}.{key}", str(exc)))
    return Quota(gpus=gpus, cpu=amounts["cpu"], memory=amounts["memory"])


def user_groups(
    memberships: Iterable[tuple[str, Mapping[str, Any] | None]],
    public_properties: Mapping[str, Any] | None = None,
) -> list[ProjectGroup]:
    """The groups a user may spawn in: their hub groups plus `public`, public last.

    A group with bad properties raises: an admin must fix it, and the user sees which.
    """
    groups = [parse_group(name, props) for name, props in memberships if name != PUBLIC]
    public_props = next((props for name, props in memberships if name == PUBLIC), None)
    groups.append(parse_group(PUBLIC, public_props if public_props is not None else public_properties))
    return groups


def choose_group(groups: list[ProjectGroup], requested: Any) -> ProjectGroup:
    """The requested group, or the first project group (public only if it is the only one)."""
    if requested in (None, ""):
        return groups[0]
    names = [g.name for g in groups]
    if not isinstance(requested, str) or requested not in names:
        raise ValidationError(
            "invalid server options",
            [
                FieldError(
                    "group",
                    f"you are not in group '{requested}'"
                    + did_you_mean(str(requested), names)
                    + f" (your groups: {', '.join(names)})",
                )
            ],
        )
    return groups[names.index(requested)]
