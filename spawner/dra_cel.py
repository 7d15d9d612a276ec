"""A DeviceClass's or a DRA type's CEL selector, evaluated against one device with cel-python
(`celpy`), in the shape Kubernetes documents: `device.driver`, and `device.attributes["domain"].name`
(an attribute the slice writes unqualified is its driver's domain). So `||`, `in`, `startsWith`,
`matches` and the rest of CEL's standard library work as the scheduler evaluates them.

What kubelab cannot bind faithfully it leaves out, so an expression reading it fails and the
answer is None (unknown), never a guess: `device.capacity` (Kubernetes quantities), `version`
attributes (Kubernetes' semver library) and `device.allowMultipleAllocations`. As in the
scheduler, a runtime error (an attribute the device lacks) is no answer either. A program is
compiled once per expression (transpiled to Python: CompiledRunner evaluates about four times
faster than the interpreter), and an answer kept per expression and device as the slice describes
it: the hub's watch lists the slices again every few minutes, which then costs no evaluation.
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any

import celpy
from celpy import celtypes

log = logging.getLogger(__name__)
# celpy logs each runtime error (a device lacking an attribute a selector reads: an answer here,
# "unknown") at ERROR, one line per device and expression, into the hub's log
logging.getLogger("celpy").setLevel(logging.CRITICAL)

_KINDS = {"string": celtypes.StringType, "int": celtypes.IntType, "bool": celtypes.BoolType}


@functools.lru_cache(maxsize=1024)
def program(expression: str) -> Any:
    """The compiled program, or None where the expression is not CEL kubelab can run."""
    environment = celpy.Environment(runner_class=celpy.CompiledRunner)
    try:
        return environment.program(environment.compile(expression))
    except Exception as exc:  # cel-python's parse and check errors share no base class
        log.info("DRA selector %r not evaluated: %s", expression, exc)
        return None


def _attributes(driver: str, attributes: dict[str, Any]) -> celtypes.MapType:
    """`{"model": {"string": "A100"}}` as `{"<driver>": {"model": "A100"}}`, by domain."""
    domains: dict[str, dict[celtypes.StringType, Any]] = {}
    for qualified, value in attributes.items():
        if not isinstance(value, dict) or len(value) != 1:
            continue
        [(kind, raw)] = value.items()
        if kind not in _KINDS:
            continue  # a version: no faithful binding, so reading it fails
        domain, _, name = qualified.rpartition("/")
        domains.setdefault(domain or driver, {})[celtypes.StringType(name)] = _KINDS[kind](raw)
    return celtypes.MapType({celtypes.StringType(d): celtypes.MapType(a) for d, a in domains.items()})


def evaluate(expression: str, driver: str, attributes: dict[str, Any]) -> bool | None:
    """Whether the device of `driver` with these slice `attributes` satisfies `expression`;
    None where kubelab cannot tell."""
    return _evaluate(expression, driver, json.dumps(attributes, sort_keys=True))


@functools.lru_cache(maxsize=65536)
def _evaluate(expression: str, driver: str, attributes: str) -> bool | None:
    compiled = program(expression)
    if compiled is None:
        return None
    device = celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): _attributes(driver, json.loads(attributes)),
        }
    )
    try:
        result = compiled.evaluate({"device": device})
    except Exception:  # celpy raises CELEvalError (and, on odd input, Python's own errors)
        return None
    return bool(result) if isinstance(result, celtypes.BoolType) else None
