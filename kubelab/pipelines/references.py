"""Pipeline templates: `{{ params.P }}` and `{{ steps.NAME... }}` inside a step's spec.

They are the pipeline's, not the experiment's: `{{ lr }}` in a command is left for the
experiment spec (its own params), while `{{ steps.tune.best.params.lr }}` is filled in by
the pipeline driver when the step starts. Inside a command string a value is shell-quoted,
like every other template value, and holds no template for the step's own render to read
(`kubelab.templating.shell_word`); anywhere else it is the plain text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from kubelab.templating import format_value, shell_word

REFERENCE = re.compile(r"\{\{\s*((?:steps|params)\.[A-Za-z0-9_.\-]*)\s*\}\}")


def references(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, reference) for every pipeline template in a nested mapping or list."""
    if isinstance(data, str):
        for match in REFERENCE.finditer(data):
            yield path, match.group(1)
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from references(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from references(value, f"{path}[{index}]")


def render(data: Any, values: Mapping[str, Any], key: str = "") -> Any:
    """`data` with every pipeline template replaced by its value (a whole-string template
    keeps its value's type, so `lr: "{{ steps.tune.best.params.lr }}"` stays a number)."""
    if isinstance(data, str):
        whole = REFERENCE.fullmatch(data.strip())
        if whole and key != "command":
            return values[whole.group(1)]

        def one(match: re.Match[str]) -> str:
            text = format_value(values[match.group(1)])
            return shell_word(text) if key == "command" else text

        return REFERENCE.sub(one, data)
    if isinstance(data, dict):
        return {k: render(v, values, str(k) if key != "command" else key) for k, v in data.items()}
    if isinstance(data, list):  # a list command meets no shell: its items are not quoted
        return [render(v, values, "") for v in data]
    return data


def parts(reference: str) -> list[str]:
    return reference.split(".")
