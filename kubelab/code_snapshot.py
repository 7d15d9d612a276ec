"""What a run copies into its `code/` folder: a directory, or a cell's source saved as one file
(the spec's `code` field), and the run's default name when it has none."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, did_you_mean
from kubelab.field_reader import about


@dataclass
class CodeSnapshot:
    """What to copy into the run's `code/`: a directory, or a cell's source as one file."""

    path: str | None = field(default=None, metadata=about("a directory to copy"))
    source: str | None = field(default=None, metadata=about("a script's text"))
    filename: str = field(default="main.py", metadata=about("the file `source` is saved as"))


def read_code(value: Any) -> tuple[CodeSnapshot | None, list[FieldError]]:
    """The spec's `code` (a directory path, or a mapping with `path` or `source`) and its problems."""
    if value is None:
        return None, []
    if isinstance(value, str):
        return CodeSnapshot(path=value), []
    if not isinstance(value, dict):
        return None, [FieldError("code", "must be a directory path or a mapping with 'path' or 'source'")]
    allowed = tuple(CodeSnapshot.__dataclass_fields__)
    problems = [
        FieldError(f"code.{key}", "unknown field" + did_you_mean(str(key), allowed))
        for key in value
        if key not in allowed
    ]
    snap = CodeSnapshot(path=value.get("path"), source=value.get("source"))
    snap.filename = value.get("filename") or "main.py"
    if (snap.path is None) == (snap.source is None):
        problems.append(FieldError("code", "give exactly one of 'path' (a directory) or 'source' (a script)"))
    if snap.path is not None and not isinstance(snap.path, str):
        problems.append(FieldError("code.path", "must be a string"))
    if snap.source is not None and not isinstance(snap.source, str):
        problems.append(FieldError("code.source", "must be a string"))
    name = snap.filename
    if not isinstance(name, str) or "/" in name or name.startswith(".") or "\\" in name:
        problems.append(FieldError("code.filename", "must be a plain file name such as 'train.py'"))
    return snap, problems


def default_name(command: list[str] | str, code: CodeSnapshot | None) -> str:
    """A run's name when it was given none: its script's, else its command's first word."""
    words = command.split() if isinstance(command, str) else list(command)
    for word in words:
        if word.endswith((".py", ".ipynb", ".sh")):
            return os.path.splitext(os.path.basename(word))[0]
    if code and code.source is not None:
        return os.path.splitext(code.filename)[0]
    return os.path.basename(words[0]) if words else "experiment"
