"""`{{ name }}` templating for commands, with every value shell-quoted.

A parameter is data, never shell code: `lr="0.1; rm -rf ~"` arrives as one argument. Nor is it
ever a template: a command may be rendered twice (a pipeline fills in its references, then the
step's experiment its own params), so a quoted value never holds `{{` for the later render to
read (`shell_word`): `{{ note }}` inside a value would otherwise be replaced, within the first
quotes, by note's own quoted value, and the shell would run what note holds.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
_OPENING = re.compile(r"\{(?=\{)")  # a brace that opens a template with the next one


def variables(template: str) -> list[str]:
    """Names used in a template, in order of first use."""
    return list(dict.fromkeys(_VARIABLE.findall(template)))


def undefined(template: str, values: Mapping[str, Any]) -> list[str]:
    return [name for name in variables(template) if name not in values]


def format_value(value: Any) -> str:
    """How a parameter value is spelled on a command line (`True` → `true`, like JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def shell_word(text: str) -> str:
    """`text` as one shell word that no later render reads as a template: quoted, and each `{{`
    inside the quotes spelled `{''{` (the shell joins the two quoted pieces back)."""
    return _OPENING.sub("{''", shlex.quote(text))


def render(template: str, values: Mapping[str, Any], quote: bool = True) -> str:
    def substitute(match: re.Match[str]) -> str:
        text = format_value(values[match.group(1)])
        return shell_word(text) if quote else text

    return _VARIABLE.sub(substitute, template)


def command_argv(command: list[str] | str, values: Mapping[str, Any]) -> list[str]:
    """The argv for a command: a string runs through `sh -c` with quoted values; a list,
    which no shell ever sees, has each element rendered without quoting."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", render(command, values, quote=True)]
    return [render(part, values, quote=False) for part in command]
