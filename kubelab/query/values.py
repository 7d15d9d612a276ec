"""Reading a record's fields as PQL sees them: field names and kinds, values as text,
numbers and moments, and the nested `params.a.b` paths. Shared by the query compiler
(`kubelab.query.compiler`) and the sort (`kubelab.query.sort`); evaluation never raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.query.syntax import QueryError, clip
from kubelab.run_record import DYNAMIC, field_kinds, sections, states

Record = dict[str, Any]

# Field kinds and the fields themselves come from the one record definition.
FIELDS: dict[str, str] = field_kinds()
SECTIONS = sections()  # `params.NAME`, `metrics.NAME` take any NAME
STATUSES = states()
UTC = timezone.utc


def value_text(value: Any) -> str:
    """A record value as the text a query compares it with (JSON spelling for booleans)."""
    if value.__class__ is str:
        return value
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


NUMBERS = (int, float)  # exact classes: the fast check; bool is deliberately not a number


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and value is not True and value is not False


def epoch_seconds(value: Any) -> float | None:
    """Seconds since the epoch from an ISO-8601 string (naive means UTC) or a number."""
    if value.__class__ is str:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            try:  # Python 3.10 does not read a trailing Z
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    if is_number(value) and not math.isnan(value):
        return float(value)
    return None


def field_getter(field: str) -> Callable[[Record], Any]:
    """Read a field; `params.a.b` is the key `a.b` if present, else the nested path a -> b."""
    section, dot, name = field.partition(".")
    if not dot:
        return lambda r: r.get(field)
    path, history = name.split("."), section == "metrics"

    def get(record: Record) -> Any:
        values = record.get(section)
        if values.__class__ is not dict:
            return None
        value = values.get(name)
        if value is None and len(path) > 1 and name not in values:
            value = values
            for part in path:
                value = value.get(part) if value.__class__ is dict else None
        if history and value.__class__ is list:  # a metric's history: the last value counts
            value = value[-1] if value else None
        return value

    return get


def resolve_field(source: str, name: str, pos: int, path: str) -> str:
    """The kind of field `name` (see FIELDS), or a QueryError with a suggestion."""
    if name in FIELDS:
        return FIELDS[name]
    section, dot, rest = name.partition(".")
    if section in SECTIONS:
        if not rest:
            what = "parameter" if section == "params" else "metric"
            raise QueryError(source, pos + len(name), f"expected a {what} name after '{section}.'", path)
        return DYNAMIC
    choices = [*FIELDS, *(f"{s}.{rest or 'NAME'}" for s in SECTIONS)]
    hint = did_you_mean(name.lower(), choices) or (
        f"; fields are {', '.join(FIELDS)}, params.NAME and metrics.NAME"
    )
    raise QueryError(source, pos, f"unknown field '{clip(name)}'{hint}", path)


def text_or_none(value: Any) -> str | None:
    return value_text(value) if value is not None else None


def str_or_none(value: Any) -> str | None:
    return value if value.__class__ is str else None


def lower_or_none(value: Any) -> str | None:
    return value.lower() if value.__class__ is str else None


def number_or_none(value: Any) -> float | None:
    return value if is_number(value) else None


def checked_text(text: Any, path: str) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValidationError(f"Invalid {path}", [FieldError(path, "must be text")])
    return text
