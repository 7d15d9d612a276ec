"""Free and total devices of the catalog's DRA types: the drivers' ResourceSlices minus the
devices allocated to ResourceClaims, as the hub's watch mirrors them (no listing per page view).

A device belongs to a type when its DeviceClass's selectors and the type's `selector` accept it.
Those are CEL, which the scheduler evaluates; kubelab evaluates only the shapes a catalog
usually writes, joined by `&&`: `device.driver == "…"` and `device.attributes["domain"].name
== value` (or `!=`; a string, whole number or boolean). Anything else is not guessed: the type's
total counts the devices its class accepts and its free count is unknown, said so in the form
(and admission leaves the decision to the scheduler).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

GROUP, VERSION = "resource.k8s.io", "v1"
PLURALS = ("resourceslices", "resourceclaims", "deviceclasses")
_TERM = re.compile(
    r'^device\.(?:driver|attributes\["(?P<domain>[^"]+)"\]\.(?P<name>[A-Za-z_][A-Za-z0-9_]*))'
    r"\s*(?P<op>==|!=)\s*(?P<value>\"(?:[^\"\\]|\\.)*\"|-?\d+|true|false)$"
)


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: dict[str, Any]  # as the slice writes them: {"model": {"string": "A100"}}

    @property
    def key(self) -> tuple[str, str, str]:
        return self.driver, self.pool, self.name

    def attribute(self, domain: str, name: str) -> Any:
        """The attribute's value, by its qualified name (an unqualified one is the driver's)."""
        found = self.attributes.get(f"{domain}/{name}")
        if found is None and domain == self.driver:
            found = self.attributes.get(name)
        if not isinstance(found, dict) or len(found) != 1:
            return None
        return next(iter(found.values()))


def _literal(text: str) -> Any:
    """A CEL literal of the accepted shapes as Python: a string, whole number or boolean."""
    return {"true": True, "false": False}[text] if text in ("true", "false") else ast.literal_eval(text)


def matches(expression: str, device: Device) -> bool | None:
    """Whether `device` satisfies the CEL `expression`; None where kubelab cannot evaluate it."""
    result = True
    for term in _terms(expression):
        found = _TERM.match(term)
        if found is None:
            return None
        value = _literal(found["value"])
        have = device.driver if found["name"] is None else device.attribute(found["domain"], found["name"])
        same = have == value and type(have) is type(value)
        result = result and (same if found["op"] == "==" else have is not None and not same)
    return result


def _terms(expression: str) -> list[str]:
    terms = [t.strip() for t in expression.split("&&")]
    return [t[1:-1].strip() if t.startswith("(") and t.endswith(")") else t for t in terms]


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


def dra_counts(
    types: Iterable[Any],
    classes: dict[str, list[str]],
    slices: Iterable[dict[str, Any]],
    claims: Iterable[dict[str, Any]],
) -> dict[str, DraCount]:
    """Per DRA type (anything with `name`, `device_class`, `selector`): its devices, and how
    many no claim holds."""
    devices, taken = newest_devices(slices), allocated(claims)
    counts = {}
    for gpu_type in types:
        selectors = classes.get(gpu_type.device_class)
        if selectors is None:  # no such class: nothing can be claimed of it
            counts[gpu_type.name] = DraCount(0, 0)
            continue
        total, free, known = 0, 0, True
        for device in devices:
            by_class = [matches(e, device) for e in selectors]
            if False in by_class:
                continue
            mine = matches(gpu_type.selector, device) if gpu_type.selector else True
            if mine is False:
                continue
            known = known and None not in by_class and mine is not None
            total += 1
            free += device.key not in taken
        counts[gpu_type.name] = DraCount(total, free if known else None)
    return counts


def lister(custom_api: Any, plural: str) -> Callable[..., Any]:
    """A cluster-wide list (and watch) of `plural` for a Mirror, named for its log lines."""

    async def listed(**query: Any) -> Any:
        return await custom_api.list_cluster_custom_object(GROUP, VERSION, plural, **query)

    listed.__name__ = f"list_{plural}"
    return listed
