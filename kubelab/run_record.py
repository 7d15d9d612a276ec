"""`RunRecord`: the one definition of an experiment's record as every client sees it.

`records.summary()` builds it; the REST API, the CLI, the magics, the sidebar and the
query language read it. Each field's Python type says what it holds and its `Annotated`
kind says how PQL compares it, so the query fields (`FIELDS`), the OpenAPI schema
(`json_schema()`) and, through a test, the sidebar's TypeScript `IExperimentRecord`
all follow from this class instead of being written out again.

Only the standard library: the runner imports `records`, which imports this module.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, Literal, TypedDict, Union, get_args, get_origin, get_type_hints

# How a query compares a field (see docs/query.md).
TEXT, STATUS, LIST, DATE, DURATION, NUMBER, DYNAMIC = (
    "text",
    "status",
    "list",
    "date",
    "duration",
    "number",
    "dynamic",
)
SECTION = "section"  # `params.NAME`, `metrics.NAME`: any NAME, compared by the value found
NESTED = "nested"  # a fixed sub-record whose fields are queried as `resources.gpus`

State = Literal[
    "Pending", "Queued", "Building", "Running", "Preempted", "Succeeded", "Failed", "Stopped", "Pruned"
]


class Resources(TypedDict):
    """What the run asked for (`resources.*` in a query)."""

    gpus: Annotated[int | float, NUMBER]
    gpu_type: Annotated[str | None, TEXT]
    cpu: Annotated[str | int | float | None, DYNAMIC]
    memory: Annotated[str | int | float | None, DYNAMIC]


class System(TypedDict):
    """What the run used of the machine (`system.*` in a query; kubelab/system_metrics.py);
    None where nothing was measured, never 0."""

    gpu_hours: Annotated[float | None, NUMBER]
    energy_wh: Annotated[float | None, NUMBER]
    gpu_util: Annotated[float | None, NUMBER]
    gpu_util_p95: Annotated[float | None, NUMBER]
    gpu_memory_peak_mib: Annotated[float | None, NUMBER]
    cpu_percent: Annotated[float | None, NUMBER]
    rss_peak_mib: Annotated[float | None, NUMBER]


class RunRecord(TypedDict):
    """One experiment (or trial) as `records.summary()` returns it."""

    id: Annotated[str, TEXT]
    name: Annotated[str, TEXT]
    status: Annotated[State, STATUS]
    reason: Annotated[str, TEXT]
    exit_code: Annotated[int | None, NUMBER]
    created_at: Annotated[str, DATE]
    queued_at: Annotated[str | None, DATE]
    started_at: Annotated[str | None, DATE]
    finished_at: Annotated[str | None, DATE]
    duration: Annotated[float | None, DURATION]
    params: Annotated[dict[str, Any], SECTION]
    tags: Annotated[list[str], LIST]
    description: Annotated[str, TEXT]
    note: Annotated[str, TEXT]
    parent: Annotated[str | None, TEXT]
    sweep: Annotated[str | None, TEXT]
    trial: Annotated[int | None, NUMBER]
    pipeline: Annotated[str | None, TEXT]
    pipeline_step: Annotated[str | None, TEXT]
    metrics: Annotated[dict[str, float], SECTION]
    step: Annotated[int | None, NUMBER]
    resources: Annotated[Resources, NESTED]
    gpu_ids: Annotated[list[int], LIST]
    replicas: Annotated[int, NUMBER]
    framework: Annotated[str, TEXT]
    backend: Annotated[str, TEXT]
    user: Annotated[str | None, TEXT]
    attempt: Annotated[int, NUMBER]
    priority: Annotated[int, NUMBER]
    restarts: Annotated[int, NUMBER]
    system: Annotated[System, NESTED]


def states() -> tuple[str, ...]:
    """The lifecycle states, in order (the same as `records.STATES`; a test holds them equal)."""
    return get_args(State)


def _hints(record: type) -> dict[str, Any]:
    return get_type_hints(record, include_extras=True)


def _split(hint: Any) -> tuple[Any, str]:
    """(the plain type, its kind) of an `Annotated[type, kind]` field."""
    base, kind = get_args(hint)[:2]
    return base, kind


def _members(tp: Any) -> tuple[Any, ...]:
    """The alternatives of a union (`int | None`), or the type itself."""
    if get_origin(tp) in (Union, types.UnionType):
        return get_args(tp)
    return (tp,)


def field_kinds(record: type = RunRecord, prefix: str = "") -> dict[str, str]:
    """Every queryable field and its kind; nested records are flattened to `outer.inner`."""
    kinds: dict[str, str] = {}
    for name, hint in _hints(record).items():
        base, kind = _split(hint)
        if kind == NESTED:
            kinds.update(field_kinds(base, f"{prefix}{name}."))
        elif kind != SECTION:
            kinds[prefix + name] = kind
    return kinds


def sections(record: type = RunRecord) -> tuple[str, ...]:
    """The fields that take any sub-name (`params.lr`, `metrics.loss`)."""
    return tuple(name for name, hint in _hints(record).items() if _split(hint)[1] == SECTION)


_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def _schema(tp: Any) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin is Annotated:
        return _schema(get_args(tp)[0])
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(tp))}
    if origin is dict:
        value = get_args(tp)[1]
        if value is Any:
            return {"type": "object"}
        return {"type": "object", "additionalProperties": _schema(value)}
    if origin is list:
        return {"type": "array", "items": _schema(get_args(tp)[0])}
    if isinstance(tp, type) and issubclass(tp, dict):  # a TypedDict
        hints = _hints(tp)
        return {
            "type": "object",
            "required": list(hints),
            "properties": {name: _schema(hint) for name, hint in hints.items()},
        }
    members = _members(tp)
    if len(members) > 1:
        return {"type": [_JSON_TYPES[m] for m in members]}
    return {"type": _JSON_TYPES[tp]}


def json_schema(record: type = RunRecord) -> dict[str, Any]:
    """The record as a JSON Schema (OpenAPI 3.1), every field required (null when unknown)."""
    schema = _schema(record)
    props = schema["properties"]
    props["id"]["pattern"] = "^[0-9a-z]{12}$"
    for name in ("created_at", "queued_at", "started_at", "finished_at"):
        props[name]["format"] = "date-time"
    return schema


_TS_TYPES = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def typescript_type(tp: Any) -> str:
    """How the sidebar spells a field's type (`number | null`, `Record<string, number>`)."""
    origin = get_origin(tp)
    if origin is Annotated:
        return typescript_type(get_args(tp)[0])
    if tp == State:
        return "ExperimentState"
    if origin is dict:
        value = get_args(tp)[1]
        return f"Record<string, {'unknown' if value is Any else typescript_type(value)}>"
    if origin is list:
        return typescript_type(get_args(tp)[0]) + "[]"
    if isinstance(tp, type) and issubclass(tp, dict):  # a TypedDict
        return "{ " + "; ".join(f"{k}: {typescript_type(v)}" for k, v in _hints(tp).items()) + " }"
    spelled: list[str] = []
    for member in _members(tp):
        text = _TS_TYPES[member]
        if text not in spelled:
            spelled.append(text)
    return " | ".join(spelled)


def typescript_fields(record: type = RunRecord) -> dict[str, str]:
    """Each field of the record with its TypeScript type."""
    return {name: typescript_type(hint) for name, hint in _hints(record).items()}
