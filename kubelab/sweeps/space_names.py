"""Names in a search space: which are ambiguous in flat parameters, and how they are qualified.

A trial sees NNI-shaped (nested) parameters and flat ones (`KUBELAB_PARAMS`, `{{ name }}`,
query fields). NNI lets a nested space reuse a name used elsewhere (`kernel_size` under two
layers); in the flat parameters such nested names are qualified by their storage key.
Pure: works on `kubelab.sweeps.space` objects without importing it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kubelab.errors import FieldError

if TYPE_CHECKING:
    from kubelab.sweeps.space import Parameter, Scalar


def _walk(params: tuple[Parameter, ...]) -> Iterator[Parameter]:
    for param in params:
        yield param
        for option in param.options:
            if option.space is not None:
                yield from _walk(option.space)


def check_collisions(params: tuple[Parameter, ...], ambiguous: set[str]) -> dict[str, str]:
    """Collect in `ambiguous` the paths of names that can be active in one trial together.

    NNI keeps them apart in its nested parameters; the flat parameters qualify the nested
    ones (`_qualify`). Options of one choice exclude each other, so they may reuse names
    among themselves. Returns every name this scope can set, with where it was first written.
    """
    seen: dict[str, str] = {}
    for param in params:
        names = {param.name: param.path}
        for option in param.options:
            if option.space is None:
                continue
            for name, path in check_collisions(option.space, ambiguous).items():
                if name == param.name:
                    ambiguous.add(path)
                else:
                    names.setdefault(name, path)
        for name, path in names.items():
            if name in seen:
                ambiguous.update((path, seen[name]))
            else:
                seen[name] = path
    return seen


def qualify(params: tuple[Parameter, ...], ambiguous: set[str]) -> tuple[Parameter, ...]:
    """Nested parameters whose name is ambiguous get their storage key (dotted) as flat name.

    Every parameter written at an ambiguous path is qualified, and so is any other with the
    same name nested elsewhere (an option may reuse it under a sibling option), so one flat
    name never means two parameters.
    """
    names = {p.name for p in _walk(params) if p.path in ambiguous}
    return tuple(_qualified(p, names) for p in params)


def _qualified(param: Parameter, names: set[str]) -> Parameter:
    options = tuple(
        o if o.space is None else replace(o, space=tuple(_qualified(p, names) for p in o.space))
        for o in param.options
    )
    flat = param.key.replace("/", ".") if param.name in names and "/" in param.key else ""
    return replace(param, options=options, flat=flat)


def flatten_scope(scope: tuple[Parameter, ...], values: Mapping[str, Any], flat: dict[str, Scalar]) -> None:
    known = {p.name: p for p in scope}
    for name, value in values.items():
        param = known.get(name)
        target = param.flat_name if param is not None else name
        if isinstance(value, Mapping) and "_name" in value:
            flat[target] = value["_name"]
            option = next((o for o in param.options if o.value == value["_name"]), None) if param else None
            inner = {k: v for k, v in value.items() if k != "_name"}
            flatten_scope(option.space or () if option is not None else (), inner, flat)
        else:
            flat[target] = value


def check_keys(params: tuple[Parameter, ...], errors: list[FieldError]) -> None:
    keys: dict[str, str] = {}
    for param in _walk(params):
        if param.key in keys:
            errors.append(
                FieldError(
                    param.path,
                    f"its storage key '{param.key}' is also used by {keys[param.key]}; "
                    "avoid '/' in parameter names",
                )
            )
        keys.setdefault(param.key, param.path)
