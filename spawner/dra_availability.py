"""Free and total devices of the catalog's DRA types: the drivers' ResourceSlices minus the
devices allocated to ResourceClaims, as the hub's watch mirrors them (no listing per page view).

A device belongs to a type when its DeviceClass's selectors and the type's `selector` accept it.
Those are CEL, evaluated as the scheduler does (dra_cel.py). Where an expression reads what
kubelab cannot bind faithfully, it is not guessed: the type's total counts the devices its class
accepts and its free count is unknown, said so in the form (and admission leaves the decision to
the scheduler). Which devices each type has depends on slices and classes only, so it is kept
until one of those changes; a claim's change (every allocation) recounts only what is free.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .dra_cel import evaluate
from .mirror import Mirror

GROUP, VERSION = "resource.k8s.io", "v1"
PLURALS = ("resourceslices", "resourceclaims", "deviceclasses")
Key = tuple[str, str, str]  # (driver, pool, device), as a claim's allocation names a device


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: dict[str, Any]  # as the slice writes them: {"model": {"string": "A100"}}

    @property
    def key(self) -> Key:
        return self.driver, self.pool, self.name


def matches(expression: str, device: Device) -> bool | None:
    """Whether `device` satisfies the CEL `expression`; None where kubelab cannot evaluate it."""
    return evaluate(expression, device.driver, device.attributes)


def newest_devices(slices: Iterable[dict[str, Any]]) -> list[Device]:
    """The devices of each pool's newest generation (a driver replacing its slices leaves older
    ones until it deletes them; the scheduler reads only the newest)."""
    newest: dict[tuple[str, str], int] = {}
    pools = []
    for item in slices:
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (spec.get("driver", ""), pool.get("name", ""))
        pools.append((key, int(pool.get("generation", 0)), spec.get("devices") or []))
        newest[key] = max(newest.get(key, 0), pools[-1][1])
    return [
        Device(key[0], key[1], d.get("name", ""), d.get("attributes") or {})
        for key, generation, devices in pools
        if generation == newest[key]
        for d in devices
    ]


def allocated(claims: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(driver, pool, device) of every device allocated to a claim."""
    taken = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            taken.add((result.get("driver", ""), result.get("pool", ""), result.get("device", "")))
    return taken


@dataclass(frozen=True)
class DraCount:
    total: int
    free: int | None  # None: a selector kubelab cannot evaluate


def class_selectors(classes: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """DeviceClass name -> its CEL selectors."""
    return {
        c["metadata"]["name"]: [
            s["cel"]["expression"] for s in (c.get("spec") or {}).get("selectors") or [] if "cel" in s
        ]
        for c in classes
    }


@dataclass
class Membership:
    """Which devices each DRA type has: from slices and classes alone."""

    devices: dict[str, list[Key]] = field(default_factory=dict)  # type -> devices not refused it
    unknown: set[str] = field(default_factory=set)  # types with a device kubelab cannot evaluate
    type_of: dict[Key, str] = field(default_factory=dict)  # the first type sure of it, else one unsure


def membership(
    types: Iterable[Any], classes: dict[str, list[str]], slices: Iterable[dict[str, Any]]
) -> Membership:
    """Per DRA type (anything with `name`, `device_class`, `selector`), the devices its class's
    selectors and its own accept, or may (a class's selectors run once per device)."""
    devices, found = newest_devices(slices), Membership()
    by_class: dict[tuple[str, Key], list[bool | None]] = {}
    unsure: dict[Key, str] = {}
    for gpu_type in types:
        found.devices[gpu_type.name] = []
        selectors = classes.get(gpu_type.device_class)
        if selectors is None:  # no such class: nothing can be claimed of it
            continue
        for device in devices:
            verdicts = by_class.setdefault(
                (gpu_type.device_class, device.key), [matches(e, device) for e in selectors]
            )
            mine = matches(gpu_type.selector, device) if gpu_type.selector else True
            if False in verdicts or mine is False:
                continue
            found.devices[gpu_type.name].append(device.key)
            if None in verdicts or mine is None:
                found.unknown.add(gpu_type.name)
                unsure.setdefault(device.key, gpu_type.name)
            else:
                found.type_of.setdefault(device.key, gpu_type.name)
    found.type_of = {**unsure, **found.type_of}
    return found


def counted(member: Membership, claims: Iterable[dict[str, Any]]) -> dict[str, DraCount]:
    """Per type: its devices, and how many no claim holds (None where not all are known)."""
    taken = allocated(claims)
    return {
        name: DraCount(len(keys), None if name in member.unknown else sum(k not in taken for k in keys))
        for name, keys in member.devices.items()
    }


def dra_counts(
    types: Iterable[Any],
    classes: dict[str, list[str]],
    slices: Iterable[dict[str, Any]],
    claims: Iterable[dict[str, Any]],
) -> dict[str, DraCount]:
    """Per DRA type: its devices, and how many no claim holds."""
    return counted(membership(types, classes, slices), claims)


class DraWatch:
    """The hub's mirrors of slices, claims and classes, and what is derived from them, kept
    until they change (membership until a slice or class does, counts until any does)."""

    def __init__(self, custom_api: Any) -> None:
        self.mirrors = {p: Mirror(lister(custom_api, p), self._changer(p)) for p in PLURALS}
        self._asked: list[tuple[str, str, str | None]] = []
        self._membership: Membership | None = None
        self._counts: dict[str, DraCount] | None = None

    def _changer(self, plural: str) -> Callable[[str | None, dict[str, Any] | None], None]:
        def changed(key: str | None, obj: dict[str, Any] | None) -> None:
            if plural != "resourceclaims":
                self._membership = None
            self._counts = None

        return changed

    def loaded(self) -> bool:
        return all(m.loaded.is_set() for m in self.mirrors.values())

    def membership(self, types: list[Any]) -> Membership:
        asked = [(t.name, t.device_class, t.selector) for t in types]
        if self._membership is None or asked != self._asked:
            classes = class_selectors(self.mirrors["deviceclasses"].items.values())
            self._membership = membership(types, classes, self.mirrors["resourceslices"].items.values())
            self._asked, self._counts = asked, None
        return self._membership

    def counts(self, types: list[Any]) -> dict[str, DraCount]:
        member = self.membership(types)
        if self._counts is None:
            self._counts = counted(member, self.mirrors["resourceclaims"].items.values())
        return self._counts


def lister(custom_api: Any, plural: str) -> Callable[..., Any]:
    """A cluster-wide list (and watch) of `plural` for a Mirror, named for its log lines."""

    async def listed(**query: Any) -> Any:
        return await custom_api.list_cluster_custom_object(GROUP, VERSION, plural, **query)

    listed.__name__ = f"list_{plural}"
    return listed
