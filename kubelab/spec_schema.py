"""The experiment spec as JSON Schema, derived from `ExperimentSpec` itself.

Each field's Python type gives its shape, and its metadata (`field_reader.about`) its description,
bounds and the other spellings files may use, so the OpenAPI `Spec` schema, the CLI's help
and the sidebar's form read the same declaration the parser checks against.
"""

from __future__ import annotations

import dataclasses
import types
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from kubelab.spec import ExperimentSpec

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _shape(tp: Any) -> dict[str, Any]:
    origin = get_origin(tp)
    if tp is Any:
        return {}
    if origin in (Union, types.UnionType):
        members = get_args(tp)
        if all(m in _JSON_TYPES for m in members):
            return {"type": [_JSON_TYPES[m] for m in members]}
        return {"anyOf": [_shape(m) for m in members]}
    if origin is list:
        return {"type": "array", "items": _shape(get_args(tp)[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _shape(get_args(tp)[1])}
    if dataclasses.is_dataclass(tp):
        return model_schema(tp)  # type: ignore[arg-type]
    return {"type": _JSON_TYPES[tp]}


def _field_schema(tp: Any, meta: Any) -> dict[str, Any]:
    shape = _shape(tp)
    if meta:
        shape.update(meta["schema"])
        if meta["also"]:
            shape = {"anyOf": [*shape.get("anyOf", [shape]), *meta["also"]]}
        shape["description"] = meta["description"]
    return shape


def model_schema(model: type) -> dict[str, Any]:
    """A dataclass of the spec as an object schema; unknown fields are refused, as the parser does."""
    hints = get_type_hints(model)
    fields = dataclasses.fields(model)
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {f.name: _field_schema(hints[f.name], f.metadata) for f in fields},
    }
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if required:
        schema["required"] = required
    if model.__doc__ and not model.__doc__.startswith(model.__name__ + "("):
        schema["description"] = model.__doc__.strip().splitlines()[0]
    return schema


@cache
def json_schema() -> dict[str, Any]:
    """The OpenAPI `Spec` schema (the request body of `POST /kubelab/api/experiments`)."""
    schema = model_schema(ExperimentSpec)
    schema["description"] += " See docs/spec.md; unknown fields are refused."
    schema["required"] = []  # `command`, or `code.source`: a rule the parser states
    return schema


def field_meta(path: str) -> tuple[Any, dict[str, Any]]:
    """(the Python type, the metadata) of a dotted spec field such as `resources.gpus`."""
    model: Any = ExperimentSpec
    *outer, last = path.split(".")
    for name in outer:
        model = get_type_hints(model)[name]
    found = {f.name: f for f in dataclasses.fields(model)}[last]
    return get_type_hints(model)[last], dict(found.metadata)
