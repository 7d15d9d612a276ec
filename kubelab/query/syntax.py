"""PQL's syntax: the tree the parser builds and the error every query mistake raises.

Apart from the parser so that reading a record's fields (`kubelab.query.values`) can raise
the same `QueryError` without importing the parser. Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple, Union

from kubelab.errors import FieldError, ValidationError

_EXCERPT_WIDTH = 72


class QueryError(ValidationError):
    """A malformed query or sort expression.

    `position` is 1-based and is the same number the message shows, so an editor (the sidebar's
    search box) can put the cursor where the problem is.
    """

    def __init__(self, source: str, offset: int, reason: str, path: str = "query"):
        self.source = source
        self.position = offset + 1
        self.path = path
        detail = f"Invalid {path}:\n{excerpt(source, offset)}"
        super().__init__(detail, [FieldError(path, f"position {self.position}: {reason}")])


def clip(text: str, width: int = 40) -> str:
    """Keep user text quoted in messages short."""
    return text if len(text) <= width else text[: width - 3] + "..."


def excerpt(source: str, offset: int) -> str:
    """Two indented lines: the text (windowed if long) and a caret under `offset`."""
    line = "".join(" " if c.isspace() else c for c in source)
    start = 0
    if len(line) > _EXCERPT_WIDTH:
        start = max(0, min(offset - _EXCERPT_WIDTH // 2, len(line) - _EXCERPT_WIDTH))
        shown = line[start : start + _EXCERPT_WIDTH]
        prefix = "..." if start else ""
        suffix = "..." if start + _EXCERPT_WIDTH < len(line) else ""
        line = prefix + shown + suffix
        start -= len(prefix)
    return f"    {line}\n    {' ' * (offset - start)}^"


# ---------------------------------------------------------------- tree


class Atom(NamedTuple):
    """One literal value; `match` is exact, startswith, endswith or contains (from `%`)."""

    text: str
    quoted: bool
    match: str
    pos: int  # offset in the source, for errors found while compiling


class Operation(NamedTuple):
    """`kind` is eq, set, lt, le, gt, ge, range or nil; `atoms` holds its values in order."""

    kind: str
    negate: bool
    atoms: tuple[Atom, ...]
    pos: int


# NamedTuples, not dataclasses: this module is imported on listing hot paths, and a
# dataclass costs about a millisecond to create at import time.
Node = Union["Condition", "Junction"]


class Condition(NamedTuple):
    field: str
    field_pos: int
    op: Operation


class Junction(NamedTuple):
    """`kind` is "and" or "or"; children are Conditions or Junctions."""

    kind: str
    children: tuple[Node, ...]
