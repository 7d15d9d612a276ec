"""NNI's search space, validated up front: `{"lr": {"_type": "loguniform", "_value": [1e-4, 0.1]}}`.

Every NNI type is accepted with NNI's meaning (see docs/sweeps.md):

- `choice` [options]; an option that is a mapping with `_name` is a nested space whose
  parameters exist only when that option is chosen. A trial then sees
  `{"layer": {"_name": "conv", "kernel": 3}}`, as NNI gives it.
- `randint` [lower, upper) — upper excluded, as in NNI 2.
- `uniform`, `loguniform` [low, high]; `quniform`, `qloguniform` [low, high, q] are
  `clip(round(x / q) * q, low, high)`.
- `normal`, `lognormal` [mu, sigma]; `qnormal`, `qlognormal` [mu, sigma, q].

This module is pure (no Optuna); `kubelab.sweeps.encoding` maps it onto Optuna distributions.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean, type_name
from kubelab.sweeps.config_files import read_document
from kubelab.sweeps.space_names import check_collisions, check_keys, flatten_scope, qualify

Scalar = str | int | float | bool | None

ARITY: dict[str, int | None] = {
    "choice": None,
    "randint": 2,
    "uniform": 2,
    "quniform": 3,
    "loguniform": 2,
    "qloguniform": 3,
    "normal": 2,
    "qnormal": 3,
    "lognormal": 2,
    "qlognormal": 3,
}
TYPES = tuple(ARITY)
NORMAL_TYPES = ("normal", "qnormal", "lognormal", "qlognormal")
MAX_GRID_VALUES = 100_000


@dataclass(frozen=True)
class Option:
    """One option of a choice: a plain value, or (`space` set) a nested space named `value`."""

    value: Scalar
    space: tuple[Parameter, ...] | None = None

    @property
    def nested(self) -> bool:
        return self.space is not None


@dataclass(frozen=True)
class Parameter:
    """One searched parameter.

    `path` is where it is written (for messages); `key` is its unique name across the
    space (`layer/conv/kernel` for a nested one), which tuners use to store it.
    """

    name: str
    type: str
    args: tuple[float, ...] = ()
    options: tuple[Option, ...] = ()
    path: str = ""
    key: str = ""
    flat: str = ""  # its name in flat parameters when `name` alone is ambiguous

    @property
    def flat_name(self) -> str:
        """The name a trial's flat parameters (KUBELAB_PARAMS, `{{ name }}`) use for it."""
        return self.flat or self.name

    @property
    def low(self) -> float:
        return self.args[0]

    @property
    def high(self) -> float:
        return self.args[1]

    @property
    def mu(self) -> float:
        return self.args[0]

    @property
    def sigma(self) -> float:
        return self.args[1]

    @property
    def q(self) -> float | None:
        return self.args[2] if self.type.startswith("q") else None

    @property
    def nested(self) -> bool:
        return any(option.nested for option in self.options)

    @property
    def unbounded(self) -> bool:
        return self.type in NORMAL_TYPES

    def quantize(self, x: float) -> float:
        """NNI's rounding for q-types: `round(x / q) * q`, clipped to [low, high] for the uniform ones."""
        q = self.q
        if q is None:
            return x
        value = round(x / q) * q
        if self.type in ("quniform", "qloguniform"):
            value = min(max(value, self.low), self.high)
        return float(value)

    def grid_values(self) -> list[Scalar] | None:
        """Every value this parameter can take, or None when there are infinitely many."""
        if self.type == "choice":
            return [option.value for option in self.options]
        if self.type == "randint":
            return list(range(int(self.low), int(self.high)))
        if self.type in ("quniform", "qloguniform"):
            q = float(self.args[2])
            first, last = round(self.low / q), round(self.high / q)
            if last - first + 1 > MAX_GRID_VALUES:
                return None
            return list(dict.fromkeys(self.quantize(k * q) for k in range(first, last + 1)))
        return None

    def describe_values(self) -> str:
        return f"{self.type} {list(self.args)}" if self.type != "choice" else "choice"


class SearchSpace:
    """A validated search space; `SearchSpace.parse(data)` raises ValidationError listing every problem."""

    def __init__(self, params: tuple[Parameter, ...], raw: dict[str, Any]):
        self.params = params
        self.raw = raw

    @classmethod
    def parse(cls, data: Any, root: str = "space") -> SearchSpace:
        errors: list[FieldError] = []
        if not isinstance(data, Mapping):
            raise ValidationError(
                "invalid search space",
                [
                    FieldError(
                        root,
                        f"must be a mapping of parameter names to {{_type, _value}}, not {type_name(data)}",
                    )
                ],
            )
        params = _parse_scope(data, root, "", errors)
        if not errors:
            ambiguous: set[str] = set()
            check_collisions(params, ambiguous)
            params = qualify(params, ambiguous)
            check_keys(params, errors)
        if errors:
            raise ValidationError("invalid search space", errors)
        return cls(params, _plain(data))

    @classmethod
    def empty(cls) -> SearchSpace:
        return cls((), {})

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    def walk(self) -> Iterator[Parameter]:
        """Every parameter, nested ones included, parents before children."""
        yield from _walk(self.params)

    @property
    def nested(self) -> bool:
        return any(p.nested for p in self.params)

    def to_dict(self) -> dict[str, Any]:
        plain: dict[str, Any] = _plain(self.raw)
        return plain

    def flat_names(self) -> list[str]:
        """Every name a trial may receive in its flat parameters."""
        return list(dict.fromkeys(p.flat_name for p in self.walk()))

    def flatten(self, params: Mapping[str, Any]) -> dict[str, Scalar]:
        """NNI-shaped params → flat ones: a nested choice gives its `_name` and its own parameters.

        A nested name that is also used elsewhere (NNI allows `kernel_size` under two layers)
        is qualified by its storage key with dots: `layer1.conv.kernel_size`.
        """
        flat: dict[str, Scalar] = {}
        flatten_scope(self.params, params, flat)
        return flat

    def grid_size(self) -> int | None:
        """How many distinct configurations there are, or None if infinitely many."""
        return _scope_size(self.params)

    def representative(self) -> dict[str, Scalar]:
        """One plausible flat value per name, for validating a trial template before any trial."""
        values: dict[str, Scalar] = {}
        for p in self.walk():
            if p.type == "choice":
                values.setdefault(p.flat_name, p.options[0].value)
            elif p.type == "randint":
                values.setdefault(p.flat_name, int(p.low))
            elif p.unbounded:
                mean = p.mu if p.type in ("normal", "qnormal") else math.exp(p.mu)
                values.setdefault(p.flat_name, p.quantize(mean))
            else:
                values.setdefault(p.flat_name, p.quantize(float(p.low)))
        return values


def load_space(source: str | os.PathLike[str], root: str = "space") -> SearchSpace:
    """A search space from a `.json`/`.yaml` file, or from JSON or YAML text given inline."""
    data, _ = read_document(source, root)
    return SearchSpace.parse(data, root)


# -- parsing -------------------------------------------------------------------------


def _parse_scope(
    data: Mapping[Any, Any], root: str, parent_key: str, errors: list[FieldError]
) -> tuple[Parameter, ...]:
    params: list[Parameter] = []
    for name, spec in data.items():
        if parent_key and name == "_name":
            continue
        if not isinstance(name, str) or not name:
            errors.append(
                FieldError(f"{root}.{name}", f"parameter names must be non-empty strings, not {name!r}")
            )
            continue
        path = f"{root}.{name}"
        key = f"{parent_key}/{name}" if parent_key else name
        param = _parse_parameter(name, spec, path, key, errors)
        if param is not None:
            params.append(param)
    return tuple(params)


def _parse_parameter(name: str, spec: Any, path: str, key: str, errors: list[FieldError]) -> Parameter | None:
    if not isinstance(spec, Mapping):
        errors.append(FieldError(path, f"must be a mapping with _type and _value, not {type_name(spec)}"))
        return None
    for field in spec:
        if field not in ("_type", "_value"):
            errors.append(
                FieldError(f"{path}.{field}", "unknown field" + did_you_mean(str(field), ("_type", "_value")))
            )
    kind = spec.get("_type")
    if kind is None:
        errors.append(FieldError(f"{path}._type", f"is required (one of {', '.join(TYPES)})"))
        return None
    if kind not in ARITY:
        hint = did_you_mean(str(kind), TYPES)
        errors.append(FieldError(f"{path}._type", f"unknown type {kind!r}{hint} (known: {', '.join(TYPES)})"))
        return None
    values = spec.get("_value")
    if not isinstance(values, list):
        errors.append(FieldError(f"{path}._value", f"must be a list, not {type_name(values)}"))
        return None
    if kind == "choice":
        options = _parse_options(values, f"{path}._value", key, errors)
        return None if options is None else Parameter(name, kind, (), options, path, key)
    args = _parse_numbers(kind, values, f"{path}._value", errors)
    return None if args is None else Parameter(name, kind, args, (), path, key)


def _parse_options(
    values: list[Any], path: str, key: str, errors: list[FieldError]
) -> tuple[Option, ...] | None:
    if not values:
        errors.append(FieldError(path, "choice needs at least one option"))
        return None
    mappings = [isinstance(v, Mapping) for v in values]
    if any(mappings) and not all(mappings):
        errors.append(
            FieldError(
                path,
                "options mix nested spaces (mappings with _name) and plain values; "
                "write the plain ones as {_name: value}",
            )
        )
        return None
    options: list[Option] = []
    seen: list[tuple[bool, Scalar]] = []
    ok = True
    for index, value in enumerate(values):
        where = f"{path}[{index}]"
        if isinstance(value, Mapping):
            label = value.get("_name")
            if not isinstance(label, str) or not label:
                errors.append(
                    FieldError(
                        f"{where}._name", "a nested space needs _name, a non-empty string naming the option"
                    )
                )
                ok = False
                continue
            option = Option(label, _parse_scope(value, where, f"{key}/{label}", errors))
        elif (
            value is None
            or isinstance(value, (str, bool, int))
            or (isinstance(value, float) and math.isfinite(value))
        ):
            option = Option(value)
        else:
            errors.append(
                FieldError(
                    where,
                    "options must be numbers, strings, booleans or null (or nested spaces "
                    f"with _name), not {type_name(value)}",
                )
            )
            ok = False
            continue
        marker = (isinstance(option.value, bool), option.value)
        if marker in seen:
            errors.append(FieldError(where, f"option {option.value!r} repeats an earlier option"))
            ok = False
        seen.append(marker)
        options.append(option)
    return tuple(options) if ok else None


def _parse_numbers(
    kind: str, values: list[Any], path: str, errors: list[FieldError]
) -> tuple[float, ...] | None:
    arity = ARITY[kind]
    if len(values) != arity:
        names = "[low, high, q]" if arity == 3 else "[low, high]"
        if kind in NORMAL_TYPES:
            names = "[mu, sigma]" if arity == 2 else "[mu, sigma, q]"
        elif kind == "randint":
            names = "[lower, upper)"
        errors.append(FieldError(path, f"{kind} takes {arity} numbers {names}, not {len(values)}"))
        return None
    bad = False
    for index, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            errors.append(FieldError(f"{path}[{index}]", f"must be a finite number, not {value!r}"))
            bad = True
    if bad:
        return None
    numbers = tuple(values)
    before = len(errors)
    if kind == "randint":
        for index, value in enumerate(numbers):
            if not isinstance(value, int):  # NNI refuses 1.0 too: its bounds are integers
                errors.append(
                    FieldError(f"{path}[{index}]", f"randint bounds must be integers, not {value!r}")
                )
        if len(errors) == before and numbers[0] >= numbers[1]:
            errors.append(
                FieldError(
                    path,
                    f"lower ({numbers[0]}) must be below upper ({numbers[1]}); "
                    "randint's upper bound is excluded",
                )
            )
        numbers = tuple(int(v) for v in numbers)
    elif kind in NORMAL_TYPES:
        if numbers[1] <= 0:
            errors.append(FieldError(f"{path}[1]", f"sigma must be above 0, not {numbers[1]}"))
    else:
        if kind in ("loguniform", "qloguniform") and numbers[0] <= 0:
            errors.append(
                FieldError(f"{path}[0]", f"{kind} needs low > 0 (it searches log(x)), not {numbers[0]}")
            )
        if numbers[0] > numbers[1]:  # equal bounds are one value, as NNI accepts them
            errors.append(FieldError(path, f"low ({numbers[0]}) must not be above high ({numbers[1]})"))
    if kind.startswith("q") and numbers[2] <= 0:
        errors.append(FieldError(f"{path}[2]", f"q must be above 0, not {numbers[2]}"))
    return None if len(errors) > before else numbers


# -- whole-space checks --------------------------------------------------------------


def _walk(params: tuple[Parameter, ...]) -> Iterator[Parameter]:
    for param in params:
        yield param
        for option in param.options:
            if option.space is not None:
                yield from _walk(option.space)


def _scope_size(params: tuple[Parameter, ...]) -> int | None:
    total = 1
    for param in params:
        if param.nested:
            sizes = [1 if o.space is None else _scope_size(o.space) for o in param.options]
            if any(s is None for s in sizes):
                return None
            size = sum(s for s in sizes if s is not None)
        else:
            values = param.grid_values()
            if values is None:
                return None
            size = len(values)
        total *= size
    return total


def _plain(data: Any) -> Any:
    if isinstance(data, Mapping):
        return {k: _plain(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_plain(v) for v in data]
    return data
