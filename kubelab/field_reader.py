"""Reading a mapping's fields one by one, collecting every problem instead of stopping.

A spec parser subclasses `FieldReader`: each helper returns the value (or the default) and
records a `FieldError` naming the field and the reason, so a user sees all mistakes at once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubelab.errors import FieldError, did_you_mean, type_name
from kubelab.quantity import clip, parse_duration
from kubelab.spec_values import as_int

MAX_VALUE = 32_768  # an environment variable or node selector value


def about(description: str, also: list[dict[str, Any]] | None = None, **schema: Any) -> dict[str, Any]:
    """A field's metadata, read by the parser, the options and `spec_schema` alike: what it
    means (the OpenAPI description, the CLI's help), JSON Schema bounds (`minimum`, `enum`)
    and `also`, the other spellings a file may use beside the field's Python type."""
    return {"description": description, "also": also or [], "schema": schema}


def bounds(model: type, name: str) -> dict[str, Any]:
    """The `minimum`/`maximum` a field declares, as keyword arguments for the parser."""
    schema = {f.name: f for f in dataclasses.fields(model)}[name].metadata["schema"]
    return {k: schema[k] for k in ("minimum", "maximum") if k in schema}


class FieldReader:
    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    def text(
        self, data: dict[str, Any], key: str, default: str | None, limit: int = 4096, path: str = ""
    ) -> Any:
        value = data.get(key, default)
        if value is None or value == default:
            return default
        if not isinstance(value, str):
            self.fail(path or key, f"must be a string, not {type_name(value)}")
            return default
        if len(value) > limit:
            self.fail(path or key, f"must be at most {limit} characters, not {len(value)}")
            return default
        return value

    def integer(self, data: dict[str, Any], key: str, default: int, minimum: int, maximum: int) -> int:
        value = data.get(key)
        if value is None:
            return default
        number = as_int(value)
        if number is None:
            self.fail(key, f"must be a whole number, not {value!r}")
            return default
        if number < minimum:
            self.fail(key, f"must be at least {minimum}, not {number}")
        elif number > maximum:
            self.fail(key, f"must be at most {maximum}, not {number}")
        return number

    def choice(self, data: dict[str, Any], key: str, default: str, choices: tuple[str, ...]) -> str:
        value = data.get(key)
        if value is None:
            return default
        if value not in choices:
            hint = did_you_mean(str(value), choices)
            self.fail(key, f"must be one of {', '.join(choices)}, not {value!r}{hint}")
            return default
        chosen: str = value
        return chosen

    def duration(self, data: dict[str, Any], key: str) -> float | None:
        value = data.get(key)
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(key, str(exc))
            return None

    def string_map(self, data: dict[str, Any], key: str) -> dict[str, str]:
        value = data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(key, f"must be a mapping of names to strings, not {type_name(value)}")
            return {}
        result = {}
        for name, item in value.items():
            if not isinstance(name, str) or not name:
                self.fail(f"{key}.{name}", "names must be non-empty strings")
            elif isinstance(item, (dict, list)) or item is None:
                self.fail(f"{key}.{name}", f"must be a string, not {type_name(item)}")
            elif len(name) > 253 or len(str(item)) > MAX_VALUE:
                self.fail(f"{key}.{clip(name)}", f"names may have 253 characters and values {MAX_VALUE}")
            else:
                result[name] = str(item).lower() if isinstance(item, bool) else str(item)
        return result

    def known(self, path: str, data: dict[str, Any], allowed: tuple[str, ...]) -> None:
        for key in data:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                self.fail(where, "unknown field" + did_you_mean(str(key), allowed))

    def tolerations(self, value: Any) -> list[dict[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            self.fail("tolerations", "must be a list of Kubernetes tolerations (mappings)")
            return []
        allowed = ("key", "operator", "value", "effect", "tolerationSeconds")
        for index, item in enumerate(value):
            self.known(f"tolerations[{index}]", item, allowed)
            op = item.get("operator", "Equal")
            if op not in ("Equal", "Exists"):
                self.fail(f"tolerations[{index}].operator", f"must be Equal or Exists, not {op!r}")
        return value

    def tags(self, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [t.strip() for t in value.split(",") if t.strip()]
        if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
            self.fail("tags", "must be a list of non-empty strings")
            return []
        if len(value) > 100 or any(len(t) > 200 for t in value):
            self.fail("tags", "may hold 100 tags of at most 200 characters each")
            return []
        return list(dict.fromkeys(value))
