"""Typed parameter values: converting what a user wrote to an input's declared type.

`kubelab run -P lr=0.1`, `%%train -P`, REST bodies and spec files all give values as text or
JSON; an input says int, float, str or bool, and a value that does not convert is refused.
"""

from __future__ import annotations

from typing import Any

from kubelab.templating import format_value

INPUT_TYPES = {"int": int, "float": float, "str": str, "bool": bool}
INVALID = object()  # what convert_value returns for a value that does not convert


INVALID = object()


def convert_value(kind: str, value: Any) -> Any:
    """Convert `value` to the input type `kind`, or return the `INVALID` marker."""
    if kind == "str":
        if isinstance(value, (dict, list)):
            return INVALID
        return value if isinstance(value, str) else format_value(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        return INVALID
    if kind == "int":
        number = as_int(value)
        return INVALID if number is None else number
    if kind == "float":
        if isinstance(value, bool):
            return INVALID
        try:
            return float(value)
        except (TypeError, ValueError):
            return INVALID
    return INVALID


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None
