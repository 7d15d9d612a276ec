"""Checking tuner and pruner arguments before Optuna sees them.

Arguments arrive from YAML written by people used to NNI, Katib or Optuna, so each
algorithm lists its arguments once with their Optuna keyword, their NNI aliases and the
NNI arguments that have no Optuna equivalent (refused with that sentence, never ignored).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, did_you_mean

DIRECTION = "__direction__"  # the target of `optimize_mode`, which sets the study's direction


@dataclass(frozen=True)
class Arg:
    target: str
    kind: str = "int"  # int | float | bool | choice | numbers (a list) | text
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # strictly greater than
    choices: tuple[Any, ...] = ()
    auto: bool = False  # the string "auto" is also accepted
    convert: Callable[[Any], Any] | None = None


OPTIMIZE_MODE = Arg(DIRECTION, "choice", choices=("minimize", "maximize"))
SEED = Arg("seed", "int", minimum=0, maximum=2**32 - 1)


@dataclass(frozen=True)
class ArgSchema:
    args: dict[str, Arg]
    aliases: dict[str, str] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)


def check_args(
    args: Any, schema: ArgSchema, path: str, owner: str
) -> tuple[dict[str, Any], dict[str, Any], list[FieldError]]:
    """(canonical args, Optuna keyword arguments, problems) for `args` given to `owner`."""
    errors: list[FieldError] = []
    if args is None:
        return {}, {}, errors
    if not isinstance(args, Mapping):
        return (
            {},
            {},
            [FieldError(path, f"must be a mapping of argument names to values, not {type(args).__name__}")],
        )
    canonical: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    kwargs: dict[str, Any] = {}
    known = list(schema.args) + list(schema.aliases)
    for raw_name, value in args.items():
        name = str(raw_name)
        where = f"{path}.{name}"
        if name in schema.unsupported:
            errors.append(FieldError(where, schema.unsupported[name]))
            continue
        target_name = schema.aliases.get(name, name)
        if target_name not in schema.args:
            errors.append(
                FieldError(
                    where,
                    f"{owner} has no argument '{name}'{did_you_mean(name, known)}"
                    f" (known: {', '.join(sorted(schema.args))})",
                )
            )
            continue
        if target_name in given_as:
            errors.append(FieldError(where, f"given twice, as '{given_as[target_name]}' and '{name}'"))
            continue
        given_as[target_name] = name
        ok, converted, reason = _convert(schema.args[target_name], value)
        if not ok:
            errors.append(FieldError(where, reason))
            continue
        canonical[target_name] = value
        kwargs[schema.args[target_name].target] = converted
    return canonical, kwargs, errors


def _convert(arg: Arg, value: Any) -> tuple[bool, Any, str]:
    if arg.auto and value == "auto":
        return True, value, ""
    if arg.kind == "bool":
        if not isinstance(value, bool):
            return False, None, f"must be true or false, not {value!r}"
    elif arg.kind == "choice":
        if value not in arg.choices:
            hint = did_you_mean(str(value), [str(c) for c in arg.choices])
            return False, None, f"must be one of {', '.join(map(str, arg.choices))}, not {value!r}{hint}"
    elif arg.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            also = " or 'auto'" if arg.auto else ""
            return False, None, f"must be a whole number{also}, not {value!r}"
    elif arg.kind == "numbers":
        return _numbers(arg, value)
    elif arg.kind == "text":
        if not isinstance(value, str) or not value:
            return False, None, f"must be a non-empty string, not {value!r}"
    elif arg.kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False, None, f"must be a number, not {value!r}"
        value = float(value)
    if arg.kind in ("int", "float"):
        if arg.minimum is not None and value < arg.minimum:
            return False, None, f"must be at least {arg.minimum:g}, not {value}"
        if arg.maximum is not None and value > arg.maximum:
            return False, None, f"must be at most {arg.maximum:g}, not {value}"
        if arg.above is not None and value <= arg.above:
            return False, None, f"must be above {arg.above:g}, not {value}"
    return True, (arg.convert(value) if arg.convert else value), ""


def _numbers(arg: Arg, value: Any) -> tuple[bool, Any, str]:
    """A non-empty list of numbers, each above `arg.above` when set (PBT's factors)."""
    if not isinstance(value, (list, tuple)) or not value:
        return False, None, f"must be a non-empty list of numbers, not {value!r}"
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item):
            return False, None, f"must be a list of numbers; {item!r} is not one"
        if arg.above is not None and item <= arg.above:
            return False, None, f"must be numbers above {arg.above:g}, not {item}"
    return True, tuple(float(item) for item in value), ""


def split_name(value: Any, path: str, default: str) -> tuple[Any, Any, list[FieldError]]:
    """`"tpe"` or `{name: tpe, args: {...}}` → (name, args, problems)."""
    if value is None:
        return default, None, []
    if isinstance(value, str):
        return value, None, []
    if not isinstance(value, Mapping):
        return (
            default,
            None,
            [FieldError(path, f"must be a name or a mapping with name and args, not {value!r}")],
        )
    errors = [
        FieldError(f"{path}.{key}", "unknown field" + did_you_mean(str(key), ("name", "args")))
        for key in value
        if key not in ("name", "args")
    ]
    name = value.get("name", default)
    if not isinstance(name, str):
        errors.append(FieldError(f"{path}.name", f"must be a string, not {name!r}"))
        name = default
    return name, value.get("args"), errors
