"""PQL's sort: `-metrics.loss, created_at`, records missing a key last in both directions.

Compiled once per text (cached) into key functions over `kubelab.query.values`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import lru_cache
from typing import Any

from kubelab.query.aliases import canonical_field
from kubelab.query.syntax import QueryError
from kubelab.query.values import (
    UTC,
    Record,
    checked_text,
    epoch_seconds,
    field_getter,
    is_number,
    lower_or_none,
    number_or_none,
    resolve_field,
    value_text,
)
from kubelab.run_record import DATE, DURATION, LIST, NUMBER, STATUS, TEXT


class Sort:
    """Ordered sort keys; records missing a key sort last in both directions; stable."""

    __slots__ = ("keys", "text")

    def __init__(self, text: str, keys: list[tuple[str, bool, Callable[[Record], Any]]]):
        self.text = text
        self.keys = keys  # (field, descending, key function returning None when missing)

    def apply(self, records: Iterable[Record]) -> list[Record]:
        rows = list(records)
        for _field, descending, key in reversed(self.keys):  # least significant first
            decorated = [(key(r), r) for r in rows]
            present = [d for d in decorated if d[0] is not None]
            present.sort(key=_first, reverse=descending)  # reverse=True keeps stability
            rows = [r for _, r in present] + [r for k, r in decorated if k is None]
        return rows

    __call__ = apply

    def __repr__(self) -> str:
        return f"Sort({self.text!r})"


_first = operator.itemgetter(0)
_DIGITS = re.compile(r"(\d+)")
IDS = frozenset({"id", "sweep", "pipeline", "parent"})  # fixed-width ids: their text order is time


def natural_key(text: str) -> tuple[Any, ...]:
    """`run-999` before `run-2000`: runs of digits compare as numbers (by length, then digits,
    so a name of 5,000 digits needs no int), the rest case-insensitively."""
    parts = _DIGITS.split(text)
    key: list[Any] = []
    for index, part in enumerate(parts):
        if index % 2:
            number = part.lstrip("0")
            key.append((len(number), number))
        else:
            key.append(part.lower())
    return tuple(key)


def _time_key(value: Any) -> str | None:
    """Sortable text for a timestamp without parsing the usual `...SS.fffZ` form.

    Records write UTC timestamps with milliseconds, which sort as text; anything else is
    parsed and spelled the same way (with microseconds, so both forms interleave correctly).
    """
    if value.__class__ is str and len(value) == 24 and value[19] == "." and value[23] == "Z":
        return value[:23] + "000"
    seconds = epoch_seconds(value)
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _sort_key(field: str, kind: str, descending: bool) -> Callable[[Record], Any]:
    """A key that is None when the record lacks the field (those rows go last)."""
    get = field_getter(field)
    if kind == DATE:
        return lambda r: _time_key(get(r))
    if kind == STATUS:
        return lambda r: lower_or_none(get(r))
    if kind in (NUMBER, DURATION):
        return lambda r: v if (v := number_or_none(get(r))) is not None and v == v else None
    if kind == TEXT and field in IDS:
        return lambda r: None if (v := get(r)) is None else ((t := value_text(v)).lower(), t)
    if kind == TEXT:  # natural and case-insensitive, like a file browser; exact text breaks ties
        return lambda r: None if (v := get(r)) is None else (natural_key(t := value_text(v)), t)
    numbers_rank, text_rank = (1, 0) if descending else (0, 1)

    def mixed(record: Record) -> tuple[int, Any] | None:  # params/metrics: numbers before text, always
        value = get(record)
        if value is None:
            return None
        if is_number(value):
            return None if value != value else (numbers_rank, value)
        return (text_rank, value_text(value))

    return mixed


def compile_sort(text: str) -> Sort:
    """`-metrics.loss, created_at`: comma-separated keys, `-` for descending (cached)."""
    return _compile_sort(checked_text(text, "sort"))


@lru_cache(maxsize=256)
def _compile_sort(text: str) -> Sort:
    keys: list[tuple[str, bool, Callable[[Record], Any]]] = []
    if not text.strip():
        return Sort(text, keys)
    start = 0
    for piece in text.split(","):
        pos = start + len(piece) - len(piece.lstrip())
        key = piece.strip()
        start += len(piece) + 1
        if not key:
            where = "before ','" if start <= len(text) else "after ','"
            raise QueryError(text, pos, f"expected a field name {where}", "sort")
        descending = key[0] == "-"
        field = key[1:].lstrip() if key[0] in "+-" else key
        field_pos = pos + len(key) - len(field)
        if not field or field[0] in "+-":
            raise QueryError(text, field_pos, "expected a field name after the sign", "sort")
        if any(c.isspace() for c in field):
            name, _, word = field.partition(" ")
            gap = field_pos + len(name)
            hint = (
                " (write -FIELD for descending order)"
                if word.strip().lower() in ("desc", "asc", "descending", "ascending")
                else ""
            )
            raise QueryError(text, gap, f"expected ',' between sort keys{hint}", "sort")
        field = canonical_field(field)
        kind = resolve_field(text, field, field_pos, "sort")
        if kind == LIST:
            raise QueryError(text, field_pos, f"cannot sort by '{field}': it holds a list", "sort")
        keys.append((field, descending, _sort_key(field, kind, descending)))
    return Sort(text, keys)
