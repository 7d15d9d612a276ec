"""Filter and sort experiment/trial records with PQL (Polyaxon's query language).

One implementation for REST `?query=&sort=`, `kubelab ls`, the magics and the sidebar::

    select(records, "status:succeeded, metrics.loss:<=0.3", sort="-metrics.acc", limit=10)

A query is parsed once (`kubelab.query.parser`) and compiled into plain closures, so matching a
record is a few function calls, never a walk over a tree. Parsing raises `QueryError` (a
`ValidationError`) with the position; evaluation never raises: a record with a missing field
or a value of the wrong type simply does not match (except for `nil`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import islice
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.query.literals import DATE_FORMS, date_interval, duration, number
from kubelab.query.parser import parse
from kubelab.query.sort import Sort, compile_sort
from kubelab.query.syntax import Atom, Condition, Junction, Node, Operation, QueryError, clip
from kubelab.query.values import (
    FIELDS,
    NUMBERS,
    SECTIONS,
    STATUSES,
    Record,
    checked_text,
    epoch_seconds,
    field_getter,
    is_number,
    lower_or_none,
    number_or_none,
    resolve_field,
    str_or_none,
    text_or_none,
    value_text,
)
from kubelab.run_record import LIST

# compile_sort, Sort and FIELDS are the documented `kubelab.query` API (docs/query.md), re-exported there.
__all__ = [
    "FIELDS",
    "SECTIONS",
    "STATUSES",
    "Query",
    "QueryError",
    "Sort",
    "compile_query",
    "compile_sort",
    "select",
]

Predicate = Callable[[Record], bool]
# A Test looks at a present value: True (match), False (no match) or None when the value has
# the wrong type or cannot be read; `~` turns only False into a match, so odd records never
# match a negation by accident.
Test = Callable[[Any], "bool | None"]

_STATUS_NAMES = {s.lower(): s for s in STATUSES}


# ---------------------------------------------------------------- compiling conditions


def _names_a_step(op: Operation) -> bool:
    """`step:train` or `step:train|eval`: a pipeline step's name, where `step:<10` is a metric step."""
    return op.kind in ("eq", "set") and any(number(a) is None for a in op.atoms)


class _Compiler:
    """Turns one parsed Condition into a predicate over records."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, offset: int, reason: str) -> QueryError:
        return QueryError(self.source, offset, reason)

    def node(self, node: Node) -> Predicate:
        if isinstance(node, Junction):
            parts = [self.node(child) for child in node.children]
            return _all_of(parts) if node.kind == "and" else _any_of(parts)
        return self.condition(node)

    def condition(self, cond: Condition) -> Predicate:
        if cond.field == "step" and _names_a_step(cond.op):  # `step:train` is a pipeline step
            cond = cond._replace(field="pipeline_step")
        kind = resolve_field(self.source, cond.field, cond.field_pos, "query")
        op = cond.op
        get = field_getter(cond.field)
        if kind == LIST:
            return self.any_item(cond.field, get, op)
        if op.kind == "nil":
            if op.negate:
                return lambda r: get(r) is not None
            return lambda r: get(r) is None
        return _bind(cond.field, getattr(self, kind)(cond.field, op), op.negate)

    # -- one method per field kind: each returns a test over a present (non-None) value

    def text(self, field: str, op: Operation) -> Test:
        return _ordered_test(op, lambda a: a.text, text_or_none, self)

    def status(self, field: str, op: Operation) -> Test:
        if op.kind not in ("eq", "set"):
            raise self.fail(op.pos, "status has no order; use a value or a set such as status:failed|stopped")

        def coerce(atom: Atom) -> str:
            low = atom.text.lower()
            if atom.match == "exact" and low not in _STATUS_NAMES:
                raise self.fail(atom.pos, f"unknown status '{clip(atom.text)}'{_status_hint(low)}")
            return low

        return _ordered_test(op, coerce, lower_or_none, self)

    def number(self, field: str, op: Operation) -> Test:
        def coerce(atom: Atom) -> float:
            value = number(atom)
            if value is None:
                raise self.fail(atom.pos, f"'{field}' holds numbers; '{clip(atom.text)}' is not one")
            return value

        self.no_patterns(field, op, "numbers")
        return _ordered_test(op, coerce, number_or_none, self)

    def duration(self, field: str, op: Operation) -> Test:
        def coerce(atom: Atom) -> float:
            seconds = None if atom.quoted else duration(atom.text)
            if seconds is None:
                raise self.fail(
                    atom.pos,
                    f"expected a duration such as 90, 90s, 30m, 1h or 1h30m; got '{clip(atom.text)}'",
                )
            return seconds

        self.no_patterns(field, op, "durations")
        return _ordered_test(op, coerce, number_or_none, self)

    def date(self, field: str, op: Operation) -> Test:
        self.no_patterns(field, op, "dates (write a day, a month or a range instead)")
        spans = []
        for atom in op.atoms:
            try:
                spans.append(date_interval(atom.text))
            except ValueError as problem:
                written, reason = clip(atom.text), str(problem)
                if reason.startswith("expected"):
                    reason = f"{reason}; got '{written}'"
                else:
                    reason = f"'{written}' is not a valid date ({reason}); use {DATE_FORMS}"
                raise self.fail(atom.pos, reason) from None
        (start, end), kind = spans[0], op.kind
        if kind == "range":
            (low, _), (high_start, end) = spans
            if low > high_start:
                raise self.fail(
                    op.atoms[1].pos,
                    f"empty range: '{clip(op.atoms[0].text)}' is after '{clip(op.atoms[1].text)}'",
                )
            return lambda v: None if (t := epoch_seconds(v)) is None else low <= t < end
        if kind == "set":
            return lambda v: None if (t := epoch_seconds(v)) is None else any(a <= t < b for a, b in spans)
        bound = {"eq": None, "lt": start, "le": end, "gt": end, "ge": start}[kind]
        return _date_compare(kind, start, end, bound)

    def dynamic(self, field: str, op: Operation) -> Test:
        """params/metrics: numeric comparison when both sides are numbers, text otherwise."""
        atoms, kind = op.atoms, op.kind
        values = [number(a) for a in atoms]
        if kind == "range":
            if (values[0] is None) != (values[1] is None):
                raise self.fail(op.pos, "both ends of a range must be numbers, or both text")
            if values[0] is None:
                return _ordered_test(op, lambda a: a.text, str_or_none, self)
            return _ordered_test(op, number, number_or_none, self)
        if kind in ("lt", "le", "gt", "ge"):
            if values[0] is None:
                return _ordered_test(op, lambda a: a.text, str_or_none, self)
            return _ordered_test(op, number, number_or_none, self)
        numbers = frozenset(v for v in values if v is not None)
        texts = frozenset(a.text for a in atoms if a.match == "exact")
        patterns = [_pattern(a) for a in atoms if a.match != "exact"]
        if patterns:
            return lambda v: (
                (is_number(v) and v in numbers)
                or value_text(v) in texts
                or any(p(value_text(v)) for p in patterns)
            )
        if not numbers:
            return lambda v: (v if v.__class__ is str else value_text(v)) in texts
        # a number's own spelling still counts, so metrics.loss:nan finds NaN
        return lambda v: (
            (v in numbers or str(v) in texts)
            if v.__class__ in NUMBERS
            else (v if v.__class__ is str else value_text(v)) in texts
        )

    def any_item(self, field: str, get: Callable[[Record], Any], op: Operation) -> Predicate:
        """A record matches if any item does (any tag); a missing list is an empty one."""
        if op.kind not in ("eq", "set", "nil"):
            raise self.fail(
                op.pos, f"{field} can be matched by value, set (a|b), pattern (%) or nil, not compared"
            )

        def tags_of(record: Record) -> list[Any] | tuple[Any, ...] | None:
            """The items, () for none, None when the field is not a list (matches nothing)."""
            value = get(record)
            if value is None:
                return ()
            return value if value.__class__ in (list, tuple) else None

        if op.kind == "nil":
            if op.negate:
                return lambda r: (t := tags_of(r)) is None or len(t) > 0
            return lambda r: (t := tags_of(r)) is not None and not t
        test = _ordered_test(op, lambda a: a.text, text_or_none, self)
        if op.negate:
            return lambda r: (t := tags_of(r)) is not None and not any(map(test, t))
        return lambda r: (t := tags_of(r)) is not None and any(map(test, t))

    def no_patterns(self, field: str, op: Operation, holds: str) -> None:
        for atom in op.atoms:
            if atom.match != "exact":
                raise self.fail(atom.pos, f"'%' patterns match text; '{field}' holds {holds}")


def _status_hint(word: str) -> str:
    """did_you_mean, falling back to a unique shared prefix (`sucess` -> succeeded)."""
    hint = did_you_mean(word, _STATUS_NAMES)
    if hint:
        return hint
    close = [name for name in _STATUS_NAMES if name.startswith(word[:3])]
    if len(close) == 1 and len(word) >= 3:
        return f"; did you mean '{close[0]}'?"
    return f"; statuses are {', '.join(_STATUS_NAMES)}"


def _pattern(atom: Atom) -> Test:
    """Case-insensitive starts/ends/contains, as a search box is expected to behave."""
    needle = atom.text.lower()
    if atom.match == "startswith":
        return lambda s: s.lower().startswith(needle)
    if atom.match == "endswith":
        return lambda s: s.lower().endswith(needle)
    return lambda s: needle in s.lower()


_COMPARE = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge}


def _ordered_test(
    op: Operation, coerce: Callable[[Atom], Any], norm: Callable[[Any], Any], c: _Compiler
) -> Test:
    """The test for one operation over values that `norm` makes comparable (None: no match).

    The common shapes (numbers compared, text or status looked up in a set) get closures
    with `norm` written inline: one Python call per condition keeps 10k records in a few ms.
    """
    kind = op.kind
    if kind == "range":
        low, high = (coerce(a) for a in op.atoms)
        if low > high:
            raise c.fail(
                op.atoms[1].pos,
                f"empty range: {clip(op.atoms[0].text)} is greater than {clip(op.atoms[1].text)}",
            )
        if norm is number_or_none:
            return lambda v: low <= v <= high if v.__class__ in NUMBERS or is_number(v) else None
        return lambda v: None if (n := norm(v)) is None else low <= n <= high
    if kind in _COMPARE:
        bound, compare = coerce(op.atoms[0]), _COMPARE[kind]
        if norm is number_or_none:
            return lambda v: compare(v, bound) if v.__class__ in NUMBERS or is_number(v) else None
        return lambda v: None if (n := norm(v)) is None else compare(n, bound)
    exact = [a for a in op.atoms if a.match == "exact"]
    patterns = [_pattern(a) for a in op.atoms if a.match != "exact"]
    for atom in op.atoms:
        coerce(atom)  # validates pattern atoms too (where the kind allows them at all)
    values = frozenset(coerce(a) for a in exact)
    if not patterns:
        if norm is lower_or_none:
            return lambda v: v.lower() in values if v.__class__ is str else None
        if norm is text_or_none:
            return lambda v: (v if v.__class__ is str else value_text(v)) in values
        return lambda v: None if (n := norm(v)) is None else n in values

    def test(v: Any) -> bool | None:
        n = norm(v)
        if n is None:
            return None
        return n in values or any(p(value_text(n)) for p in patterns)

    return test


def _date_compare(kind: str, start: float, end: float, bound: float | None) -> Test:
    if kind == "eq":
        return lambda v: None if (t := epoch_seconds(v)) is None else start <= t < end
    if kind in ("lt", "le"):  # before the written instant / not after its span
        return lambda v: None if (t := epoch_seconds(v)) is None else t < bound  # type: ignore[operator]
    return lambda v: None if (t := epoch_seconds(v)) is None else t >= bound  # type: ignore[operator]


def _bind(field: str, test: Test, negate: bool) -> Predicate:
    """Read the field and test it; a missing (None) value matches nothing but `nil`."""
    section, dot, name = field.partition(".")
    if not dot:
        if negate:
            return lambda r: (v := r.get(field)) is not None and test(v) is False
        return lambda r: (v := r.get(field)) is not None and test(v) is True
    if "." in name:
        get = field_getter(field)
        if negate:
            return lambda r: (v := get(r)) is not None and test(v) is False
        return lambda r: (v := get(r)) is not None and test(v) is True
    history = section == "metrics"

    def matches(record: Record) -> bool:  # field_getter inlined: the common params.lr shape
        values = record.get(section)
        if values.__class__ is not dict:
            return False
        value = values.get(name)
        if history and value.__class__ is list:
            value = value[-1] if value else None
        if value is None:
            return False
        return test(value) is False if negate else test(value) is True

    return matches


def _all_of(parts: list[Predicate]) -> Predicate:
    """One closure for up to three parts (each nested call costs time on every record)."""
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        a, b = parts
        return lambda r: a(r) and b(r)
    a, b, *rest = parts
    c = _all_of(rest)
    return lambda r: a(r) and b(r) and c(r)


def _any_of(parts: list[Predicate]) -> Predicate:
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        a, b = parts
        return lambda r: a(r) or b(r)
    a, b, *rest = parts
    c = _any_of(rest)
    return lambda r: a(r) or b(r) or c(r)


# ---------------------------------------------------------------- public API


def _always(record: Record) -> bool:
    return True


class Query:
    """A compiled query; `matches(record)` is a plain function attribute, for speed."""

    __slots__ = ("matches", "text")

    def __init__(self, text: str, matches: Predicate):
        self.text = text
        self.matches = matches

    @property
    def matches_all(self) -> bool:
        return self.matches is _always

    def filter(self, records: Iterable[Record]) -> list[Record]:
        return list(records) if self.matches is _always else list(filter(self.matches, records))

    def __repr__(self) -> str:
        return f"Query({self.text!r})"


def compile_query(text: str) -> Query:
    """Parse and compile once (cached); an empty or blank query matches every record."""
    return _compile_query(checked_text(text, "query"))


@lru_cache(maxsize=256)
def _compile_query(text: str) -> Query:
    tree = parse(text)
    return Query(text, _always if tree is None else _Compiler(text).node(tree))


def select(
    records: Iterable[Record],
    query: str = "",
    sort: str = "",
    limit: int | None = None,
    offset: int = 0,
) -> list[Record]:
    """Filter, sort, then page: the one call every listing uses."""
    for name, value in (("limit", limit), ("offset", offset)):
        if value is None and name == "limit":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValidationError(
                f"Invalid {name}", [FieldError(name, f"must be a whole number >= 0, got {value!r}")]
            )
    matched = compile_query(query)
    order = compile_sort(sort)
    stop = None if limit is None else offset + limit
    if not order.keys:
        return list(islice(filter(matched.matches, records), offset, stop))
    return order.apply(filter(matched.matches, records))[offset:stop]
