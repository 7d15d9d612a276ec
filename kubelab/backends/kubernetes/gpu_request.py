"""Which extended resource, how many and on which nodes: a spec's GPUs as a cluster exposes them.

A cluster shares GPUs in two ways the NVIDIA device plugin advertises: time-slicing (each GPU
is offered as several `nvidia.com/gpu` replicas on nodes labelled, e.g., `A100-SHARED`) and
MIG (each profile is its own resource, `nvidia.com/mig-1g.10gb`, found by the resource and
not by a label). The hub's catalog says which of its types are which (`KUBELAB_GPU_TYPES`);
this module turns `resources.gpus`/`gpu_type` into that resource, refusing a share of a GPU
where no time-sliced type exists. A type with `sharing: dra` is requested through Dynamic
Resource Allocation instead: a claim on the catalog's DeviceClass (`dra.py` builds it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError
from kubelab.gpu_share import is_fraction

SHARING = ("exclusive", "time-slicing", "mig", "dra")
KEYS = ("name", "label_value", "resource", "sharing")
DRA_KEYS = ("device_class", "selector")
MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb$")


def default_sharing(resource: str) -> str:
    """`mig` for a MIG profile's resource (`nvidia.com/mig-1g.10gb`), else `exclusive`."""
    return "mig" if MIG_RESOURCE.match(resource) else "exclusive"


@dataclass(frozen=True)
class SharedType:
    """One catalog type as runs see it: its name, node label value, resource and sharing; a
    DRA type's DeviceClass and optional CEL selector instead of a resource to ask for."""

    name: str
    label_value: str
    resource: str
    sharing: str = "exclusive"
    device_class: str = ""
    selector: str = ""

    def to_json(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in KEYS + DRA_KEYS}


def parse_types(text: str | None, variable: str = "KUBELAB_GPU_TYPES") -> list[SharedType]:
    """The hub's catalog types from the notebook's variable; ValueError naming what is wrong."""
    if not text:
        return []
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{variable} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise ValueError(f"{variable} must be a list of GPU types")
    types = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in KEYS):
            raise ValueError(f"{variable}[{index}] must be an object with string {', '.join(KEYS)}")
        if item["sharing"] not in SHARING:
            raise ValueError(f"{variable}[{index}].sharing must be one of {', '.join(SHARING)}")
        dra = {k: item.get(k) or "" for k in DRA_KEYS}
        if not all(isinstance(v, str) for v in dra.values()):
            raise ValueError(f"{variable}[{index}]: device_class and selector must be strings")
        if item["sharing"] == "dra" and not dra["device_class"]:
            raise ValueError(f"{variable}[{index}].device_class is required for sharing dra")
        types.append(SharedType(*(item[k] for k in KEYS), **dra))
    return types


@dataclass(frozen=True)
class GpuRequest:
    """What a pod asks for: `amount` of `resource`, on nodes matching `selector`."""

    resource: str
    amount: int
    selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DraRequest:
    """What a pod claims through DRA: `count` devices of `device_class`, matching `selector`."""

    device_class: str
    count: int
    selector: str = ""


def find_type(types: list[SharedType], name: str) -> SharedType | None:
    lowered = name.lower()
    return next((t for t in types if lowered in (t.name.lower(), t.label_value.lower())), None)


def gpu_request(
    gpus: float, gpu_type: str | None, types: list[SharedType], resource: str, label: str
) -> GpuRequest | DraRequest | FieldError | None:
    """The pod's GPU request (None without GPUs), or why it cannot be made. `resource` and
    `label` are the notebook's defaults for a type the catalog does not describe."""
    if not gpus:
        return None
    known = find_type(types, gpu_type) if gpu_type else None
    if known is not None and known.sharing == "dra":
        if is_fraction(gpus):
            why = f"GPU type {known.name} claims whole devices of DeviceClass {known.device_class} "
            return FieldError("resources.gpus", why + f"through DRA; a share ({gpus:g}) cannot be claimed")
        return DraRequest(known.device_class, int(gpus), known.selector)
    if is_fraction(gpus):
        shared = [t for t in ([known] if known else [] if gpu_type else types) if t.sharing == "time-slicing"]
        if not shared:
            where = f"GPU type {gpu_type}" if gpu_type else "this cluster"
            return FieldError(
                "resources.gpus",
                f"a share of a GPU ({gpus:g}) needs a time-sliced GPU type and {where} has none; "
                "ask for a whole GPU, or a MIG profile such as 1g.10gb as resources.gpu_type",
            )
        known, gpus = shared[0], 1  # one replica of a time-sliced GPU: the device plugin's share
    if known is None:
        return GpuRequest(resource, int(gpus), {label: gpu_type} if gpu_type else {})
    if known.sharing == "mig":  # the profile's resource finds its nodes
        return GpuRequest(known.resource, int(gpus))
    return GpuRequest(known.resource, int(gpus), {label: known.label_value})


def types_json(types: list[Any]) -> str:
    """`KUBELAB_GPU_TYPES` for the notebook pod, from anything with SharedType's attributes."""
    return json.dumps(
        [
            SharedType(*(getattr(t, k) for k in KEYS), **{k: getattr(t, k, "") for k in DRA_KEYS}).to_json()
            for t in types
        ],
        sort_keys=True,
    )
