"""GPU profiles: the admin's catalog of GPU types and images, and the user's server options.

The form's fields and the `user_options` JupyterHub's REST API accepts are one thing with
stable keys: `image`, `cpu`, `memory`, `gpus`, `gpu_type`, `group`, `shm` (and `profile`, a
named preset of those). `gpus` also takes cube-studio's `resource_gpu` strings — `"2"`,
`"1(V100)"`, `"1(nvidia,V100)"`, full-width brackets too — so settings copied from there work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from kubelab.backends.kubernetes.dra import quota_key
from kubelab.backends.kubernetes.gpu_request import SHARING, default_sharing
from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.gpu_share import is_fraction, parse_gpus
from kubelab.quantity import parse_quantity

from . import interfaces

DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

OPTION_KEYS = ("profile", "image", "cpu", "memory", "gpus", "gpu_type", "group", "shm", "interface")
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPU_LABEL = "gpu-type"
GPU_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
_RESOURCE_GPU = re.compile(r"^\s*(?P<count>[^(（]*?)\s*(?:[(（](?P<inner>[^)）]*)[)）])?\s*$")


@dataclass(frozen=True)
class GpuType:
    """A kind of GPU the cluster has: found by a node label, requested by a resource name.
    `sharing` says how the device plugin shares it: `time-slicing` (each GPU offered as several
    replicas), `mig` (a MIG profile's own resource, whose nodes are found by that resource, not
    a label), `dra` (claimed through Dynamic Resource Allocation from `device_class`, optionally
    narrowed by a CEL `selector`; its `resource` is the class's quota key) or `exclusive`."""

    name: str
    label_value: str
    resource: str = DEFAULT_GPU_RESOURCE
    max_per_user: int = 8
    sharing: str = "exclusive"
    device_class: str = ""
    selector: str = ""

    @property
    def by_resource(self) -> bool:
        """Nodes are found by advertising the resource (a MIG profile), not by the type label."""
        return self.sharing == "mig"

    @property
    def vendor(self) -> str:
        """`nvidia` for `nvidia.com/gpu`: what cube-studio writes in `1(nvidia,V100)`."""
        return self.resource.split(".", 1)[0].split("/", 1)[0].lower()


def dra_problems(path: str, sharing: str, device_class: Any, selector: Any) -> list[FieldError]:
    """Why a DRA type's DeviceClass or selector cannot be used (none for a good one)."""
    problems = []
    if sharing == "dra" and (not isinstance(device_class, str) or not DNS_NAME.match(device_class)):
        why = "names the DeviceClass a DRA type claims from (a DNS name such as gpu.example.com)"
        problems.append(FieldError(f"{path}.device_class", f"is required: it {why}, not {device_class!r}"))
    elif sharing != "dra" and device_class:
        problems.append(FieldError(f"{path}.device_class", "is only for sharing: dra"))
    if not isinstance(selector, str) or (selector and sharing != "dra"):
        problems.append(FieldError(f"{path}.selector", "must be a CEL expression, for sharing: dra only"))
    return problems


@dataclass
class Catalog:
    """What an admin offers. Built from plain config (`Catalog.parse`) so it can live in
    `jupyterhub_config.py` as a dict and be checked before the hub starts."""

    gpu_types: list[GpuType] = field(default_factory=list)
    images: list[str] = field(default_factory=lambda: ["quay.io/jupyter/base-notebook:latest"])
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpu_label: str = DEFAULT_GPU_LABEL
    gpu_tolerations: list[dict[str, Any]] = field(default_factory=lambda: list(GPU_TOLERATIONS))
    default_cpu: str = "1"
    default_memory: str = "4Gi"
    default_shm: str = "1Gi"
    max_cpu: str = "32"
    max_memory: str = "256Gi"
    max_shm: str = "64Gi"

    @classmethod
    def parse(cls, data: dict[str, Any] | None, where: str = "catalog") -> Catalog:
        """A catalog from config, or a ValidationError naming each bad key."""
        data = dict(data or {})
        errors: list[FieldError] = []
        allowed = tuple(cls.__dataclass_fields__)
        for key in data:
            if key not in allowed:
                errors.append(FieldError(f"{where}.{key}", "unknown field" + did_you_mean(key, allowed)))
        catalog = cls()
        types = data.get("gpu_types", [])
        if not isinstance(types, list):
            errors.append(FieldError(f"{where}.gpu_types", "must be a list of GPU types"))
            types = []
        for index, entry in enumerate(types):
            path = f"{where}.gpu_types[{index}]"
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                errors.append(FieldError(path, "must be a mapping with at least a 'name'"))
                continue
            unknown = [k for k in entry if k not in GpuType.__dataclass_fields__]
            errors += [
                FieldError(
                    f"{path}.{k}", "unknown field" + did_you_mean(k, tuple(GpuType.__dataclass_fields__))
                )
                for k in unknown
            ]
            limit = entry.get("max_per_user", 8)
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                errors.append(
                    FieldError(f"{path}.max_per_user", f"must be a whole number >= 0, not {limit!r}")
                )
                limit = 0
            resource = str(entry.get("resource", DEFAULT_GPU_RESOURCE))
            device_class, selector = entry.get("device_class", ""), entry.get("selector", "")
            sharing = entry.get("sharing", "dra" if device_class else default_sharing(resource))
            if sharing not in SHARING:
                errors.append(
                    FieldError(f"{path}.sharing", f"must be one of {', '.join(SHARING)}, not {sharing!r}")
                )
                sharing = "exclusive"
            errors += dra_problems(path, sharing, device_class, selector)
            if sharing == "dra" and isinstance(device_class, str):
                resource = quota_key(device_class)
            catalog.gpu_types.append(
                GpuType(
                    name=entry["name"],
                    label_value=str(entry.get("label_value", entry["name"])),
                    resource=resource,
                    max_per_user=limit,
                    sharing=sharing,
                    device_class=str(device_class or ""),
                    selector=str(selector or ""),
                )
            )
        for key in ("images",):
            if key in data:
                value = data[key]
                if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                    errors.append(
                        FieldError(
                            f"{where}.{key}",
                            "must be a list of image names (empty on one machine, where no image is used)",
                        )
                    )
                else:
                    catalog.images = list(value)
        if "profiles" in data:
            if not isinstance(data["profiles"], dict):
                errors.append(FieldError(f"{where}.profiles", "must map profile names to options"))
            else:
                catalog.profiles = dict(data["profiles"])
        for key in (
            "gpu_label",
            "default_cpu",
            "default_memory",
            "default_shm",
            "max_cpu",
            "max_memory",
            "max_shm",
        ):
            if key in data:
                if not isinstance(data[key], (str, int)) or isinstance(data[key], bool):
                    errors.append(FieldError(f"{where}.{key}", "must be a string"))
                else:
                    setattr(catalog, key, str(data[key]))
        if "gpu_tolerations" in data:
            if not isinstance(data["gpu_tolerations"], list):
                errors.append(FieldError(f"{where}.gpu_tolerations", "must be a list of tolerations"))
            else:
                catalog.gpu_tolerations = list(data["gpu_tolerations"])
        if errors:
            raise ValidationError("invalid GPU catalog", errors)
        for name, preset in catalog.profiles.items():  # presets must be valid options themselves
            if not isinstance(preset, dict) or "profile" in preset:
                raise ValidationError(
                    "invalid GPU catalog",
                    [
                        FieldError(
                            f"{where}.profiles.{name}",
                            "must map option names (image, cpu, gpus, ...) to values",
                        )
                    ],
                )
            _check_keys(preset, f"{where}.profiles.{name}")
        return catalog

    def gpu_type(self, name: str) -> GpuType | None:
        for gpu_type in self.gpu_types:
            if gpu_type.name.lower() == name.lower():
                return gpu_type
        return None


@dataclass(frozen=True)
class NotebookOptions:
    """Validated server options: what one notebook asks for."""

    image: str
    cpu: str
    memory: str
    gpus: float = 0  # whole units of the type, or 1/n of one (a share, as a run's resources.gpus)
    gpu_type: str | None = None
    group: str = "public"
    shm: str = "1Gi"
    profile: str | None = None
    interface: str = interfaces.DEFAULT

    def to_user_options(self) -> dict[str, Any]:
        """The stable `user_options` keys, as the REST API would send them."""
        data = {
            "image": self.image,
            "cpu": self.cpu,
            "memory": self.memory,
            "gpus": self.gpus,
            "gpu_type": self.gpu_type,
            "group": self.group,
            "shm": self.shm,
            "interface": None if self.interface == interfaces.DEFAULT else self.interface,
        }
        return {k: v for k, v in data.items() if v not in (None, "")}

    @property
    def units(self) -> int:
        """Units of the type the server holds: a share takes one (a replica, or room on one GPU)."""
        return 1 if is_fraction(self.gpus) else int(self.gpus)


def parse_resource_gpu(value: Any, field: str = "gpus") -> tuple[float, str | None, str | None]:
    """(count, vendor, type) from `2`, `"2"`, `"1(V100)"`, `"1(nvidia,V100)"` or `"1（V100）"`;
    a count may be a share of one GPU (`0.5`, `"0.25(T4)"`), checked as a run's `resources.gpus`."""
    if isinstance(value, bool) or value is None:
        raise _invalid(field, f"must be a GPU count such as 1 or '1(V100)', not {value!r}")
    count: float
    if isinstance(value, (int, float)):
        count, vendor, gpu_type = _amount(value, field), None, None
    elif isinstance(value, str):
        match = _RESOURCE_GPU.match(value)
        if not match or not match["count"]:
            raise _invalid(field, f"'{value}' is not a GPU count such as '2', '1(V100)' or '1(nvidia,V100)'")
        try:
            number = Decimal(match["count"])
        except ArithmeticError:
            raise _invalid(field, f"'{match['count']}' in '{value}' is not a number") from None
        count = _amount(float(number), field)
        vendor = gpu_type = None
        if match["inner"] is not None:
            parts = [p.strip() for p in re.split(r"[,，]", match["inner"])]
            if len(parts) > 2 or not all(parts):
                raise _invalid(field, f"'{value}': inside the brackets write TYPE or VENDOR,TYPE")
            vendor, gpu_type = (parts[0].lower(), parts[1]) if len(parts) == 2 else (None, parts[0])
    else:
        raise _invalid(field, f"must be a GPU count such as 1 or '1(V100)', not {type(value).__name__}")
    if count < 0:
        raise _invalid(field, f"must not be negative, not {count}")
    return count, vendor, gpu_type


def _amount(number: float, field: str) -> float:
    """Whole GPUs, or 1/n of one: the same rule as a run's `resources.gpus` (kubelab.gpu_share)."""
    if number < 0:
        return int(number) if float(number).is_integer() else number  # said below, as negative
    amount, why = parse_gpus(number)
    if why:
        raise _invalid(field, why)
    return amount


def _invalid(field: str, reason: str) -> ValidationError:
    return ValidationError("invalid server options", [FieldError(field, reason)])


def _check_keys(options: dict[str, Any], where: str = "") -> None:
    errors = [
        FieldError(
            f"{where}.{k}" if where else str(k),
            "unknown option" + did_you_mean(str(k), OPTION_KEYS) + f" (options: {', '.join(OPTION_KEYS)})",
        )
        for k in options
        if k not in OPTION_KEYS
    ]
    if errors:
        raise ValidationError("invalid server options", errors)


def validate_options(
    raw: dict[str, Any] | None,
    catalog: Catalog,
    group: str = "public",
    allowed_images: list[str] | None = None,
    local: bool = False,
) -> NotebookOptions:
    """Check `user_options` against the catalog; every problem is reported at once.

    `group` is the already chosen project group; `allowed_images` its image list (empty: all
    of the catalog's). `local`: one machine, whose ledger shares any GPU (a cluster shares only
    its time-sliced types).
    """
    if raw is not None and not isinstance(raw, dict):
        raise _invalid("", f"server options must be a mapping, not {type(raw).__name__}")
    raw = dict(raw or {})
    _check_keys(raw)
    errors: list[FieldError] = []
    merged: dict[str, Any] = {}
    profile = raw.get("profile") or None
    if profile is not None:
        if not isinstance(profile, str) or profile not in catalog.profiles:
            choices = list(catalog.profiles)
            errors.append(
                FieldError(
                    "profile",
                    f"unknown profile '{profile}'"
                    + did_you_mean(str(profile), choices)
                    + (f" (profiles: {', '.join(choices)})" if choices else " (no profiles are configured)"),
                )
            )
        else:
            merged.update(catalog.profiles[profile])
    merged.update({k: v for k, v in raw.items() if v not in (None, "") and k != "profile"})

    images = [i for i in catalog.images if not allowed_images or i in allowed_images]
    image = merged.get("image", images[0] if images else "")
    if not catalog.images and "image" in merged:
        errors.append(FieldError("image", "this hub runs servers on one machine and offers no images"))
    elif catalog.images and image not in images:
        why = f" for group '{group}'" if allowed_images else ""
        errors.append(
            FieldError(
                "image",
                f"unknown image '{image}'{why}"
                + did_you_mean(str(image), images)
                + f" (images: {', '.join(images)})",
            )
        )
    cpu = _quantity(merged.get("cpu", catalog.default_cpu), "cpu", catalog.max_cpu, errors)
    memory = _quantity(merged.get("memory", catalog.default_memory), "memory", catalog.max_memory, errors)
    shm = _quantity(merged.get("shm", catalog.default_shm), "shm", catalog.max_shm, errors)
    interface = merged.get("interface", interfaces.DEFAULT)
    if (problem := interfaces.check(interface)) is not None:
        errors.append(FieldError("interface", problem))

    gpus: float = 0
    gpu_type = merged.get("gpu_type")
    try:
        gpus, vendor, typed = parse_resource_gpu(merged.get("gpus", 0))
    except ValidationError as exc:
        errors += exc.fields
        vendor = typed = None
    if typed and gpu_type and typed.lower() != str(gpu_type).lower():
        errors.append(FieldError("gpu_type", f"'{gpu_type}' contradicts the type '{typed}' in gpus"))
    gpu_type = typed or gpu_type
    if is_fraction(gpus) and not local:
        gpu_type, unshared = _shared_type(catalog, gpu_type, gpus)
        errors += [unshared] if unshared else []
    if gpu_type is not None:
        known = catalog.gpu_type(str(gpu_type)) if isinstance(gpu_type, str) else None
        if known is None:
            names = [t.name for t in catalog.gpu_types]
            errors.append(
                FieldError(
                    "gpu_type",
                    f"unknown GPU type '{gpu_type}'"
                    + did_you_mean(str(gpu_type), names)
                    + (f" (types: {', '.join(names)})" if names else " (no GPU types are configured)"),
                )
            )
            gpu_type = None
        else:
            gpu_type = known.name
            if vendor and vendor != known.vendor:
                errors.append(
                    FieldError(
                        "gpus",
                        f"vendor '{vendor}' does not make {known.name} (its resource is {known.resource})",
                    )
                )
            if gpus > known.max_per_user:
                errors.append(
                    FieldError(
                        "gpus", f"at most {known.max_per_user} {known.name} GPU(s) per user, not {gpus}"
                    )
                )
    elif gpus and not catalog.gpu_types:
        errors.append(FieldError("gpus", "this hub offers no GPUs (no GPU types are configured)"))
    elif gpus and gpus > max(t.max_per_user for t in catalog.gpu_types):
        # Without a type the GPUs may be of any type: no more than the largest type's limit.
        most = max(t.max_per_user for t in catalog.gpu_types)
        errors.append(FieldError("gpus", f"at most {most} GPU(s) per user of any type, not {gpus}"))
    elif vendor and not any(t.vendor == vendor for t in catalog.gpu_types):
        errors.append(FieldError("gpus", f"no GPU type of vendor '{vendor}' is configured"))
    if errors:
        raise ValidationError("invalid server options", errors)
    return NotebookOptions(
        image=image,
        cpu=cpu,
        memory=memory,
        gpus=gpus,
        gpu_type=gpu_type if gpus else None,
        group=group,
        shm=shm,
        profile=profile,
        interface=str(interface),
    )


def _shared_type(catalog: Catalog, gpu_type: Any, gpus: float) -> tuple[Any, FieldError | None]:
    """The type a cluster notebook's share is of (the asked one, else the catalog's first
    time-sliced type), or why there is none: only a time-sliced GPU is offered in shares."""
    known = catalog.gpu_type(gpu_type) if isinstance(gpu_type, str) else None
    if gpu_type is not None and known is None:
        return gpu_type, None  # unknown: said by name below
    shared = [t for t in ([known] if known else catalog.gpu_types) if t.sharing == "time-slicing"]
    if shared:
        return shared[0].name, None
    where = f"{known.name} is not (sharing: {known.sharing})" if known else "this hub has none"
    reason = f"a share of a GPU ({gpus:g}) needs a time-sliced GPU type, and {where}"
    return gpu_type, FieldError("gpus", reason + "; ask for whole GPUs (1, 2, ...)")


def _quantity(value: Any, field: str, maximum: str, errors: list[FieldError]) -> str:
    try:
        amount = parse_quantity(value)
    except ValueError as exc:
        errors.append(FieldError(field, str(exc)))
        return str(value)
    if amount <= 0:
        errors.append(FieldError(field, f"must be more than zero, not {value!r}"))
    elif amount > parse_quantity(maximum):
        errors.append(FieldError(field, f"at most {maximum}, not {value}"))
    return str(value).strip()
