"""PQL text -> a small tree of conditions; `kubelab.query` turns the tree into closures.

Parsing is kept apart from evaluation so every mistake is found once, up front, with its
position, and filtering thousands of records never meets malformed input. Everything here is
standard library only: the query language sits on listing hot paths.

Grammar (AND binds tighter than OR)::

    query     := or_expr?
    or_expr   := and_expr (("OR" | "|") and_expr)*     # `|` joins conditions: a:x | b:y
    and_expr  := term (("," | "AND") term)*
    term      := "(" or_expr ")" | field ":" operation
    operation := "~"? ("nil" | ("<" | "<=" | ">" | ">=") atom | atom ".." atom
                 | atom ("|" atom)+ | atom)
    atom      := "%"? (text | quoted) "%"?
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import NamedTuple, Union

from kubelab.errors import FieldError, ValidationError
from kubelab.query_aliases import canonical_field

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
        detail = f"Invalid {path}:\n{_excerpt(source, offset)}"
        super().__init__(detail, [FieldError(path, f"position {self.position}: {reason}")])


def clip(text: str, width: int = 40) -> str:
    """Keep user text quoted in messages short."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _excerpt(source: str, offset: int) -> str:
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


# ---------------------------------------------------------------- Polyaxon's names


def _is_field(word: str) -> bool:
    """True when `word` names a field, so `a:x | word:y` starts a condition, not a value."""
    from kubelab.query import FIELDS, SECTIONS  # loaded already: it imports this module

    name = canonical_field(word)
    return name in FIELDS or name.partition(".")[0] in SECTIONS


# ---------------------------------------------------------------- lexer

# Characters that cannot appear in a field name; a field name is anything else.
_FIELD_STOP = frozenset(" \t\r\n\f\v:,()\"'|~<>=%")
_JOINER = re.compile(r"\s+(?:and|or)(?=[\s(]|$)", re.IGNORECASE)
_NEXT_CONDITION = re.compile(r"\s+[A-Za-z_][^\s:,()\"'|~<>=%]*\s*:")
_WORD_OPERATORS = frozenset({"and", "or"})


class _Token(NamedTuple):
    kind: str  # "(", ")", ",", "and", "or", "cond", "end"
    pos: int
    text: str = ""
    value: str = ""  # a condition's raw operation text
    value_pos: int = 0


def _closing_quote(source: str, start: int, path: str) -> int:
    """Offset of the quote closing the one at `start` (backslash escapes the next character)."""
    quote, k = source[start], start + 1
    while k < len(source):
        if source[k] == "\\":
            k += 2
            continue
        if source[k] == quote:
            return k
        k += 1
    raise QueryError(source, start, f"this {quote} is never closed; add a closing {quote}", path)


def _scan_value(source: str, start: int) -> int:
    """End offset of the operation text that begins at `start` (just after ':').

    A value runs to an unquoted ',' or ')' or a word AND/OR; spaces inside are kept so
    `created_at:2026-11-21 10:00` works. Balanced parentheses inside a value are literal.
    """
    k, depth, n = start, 0, len(source)
    while k < n:
        c = source[k]
        if c in "\"'":
            k = _closing_quote(source, k, "query") + 1
            continue
        if c == "(":
            if depth == 0 and k > start and source[k - 1].isspace():
                raise QueryError(
                    source,
                    k,
                    "expected ',', 'AND' or 'OR' before '(' (quote the value if the "
                    "parenthesis is part of it)",
                )
            depth += 1
        elif c == ")":
            if depth == 0:
                break
            depth -= 1
        elif c == "," and depth == 0:
            break
        elif c == "|" and depth == 0 and _condition_follows(source, k + 1):
            break  # `status:stopped | name:x`: the bar joins two conditions (OR)
        elif c.isspace() and depth == 0 and not source[k - 1].isspace():
            if _JOINER.match(source, k):
                break
            follow = _NEXT_CONDITION.match(source, k)
            if follow and _is_field(follow.group().strip().rstrip(":").strip()):
                word = len(follow.group()) - len(follow.group().lstrip())
                raise QueryError(
                    source,
                    k + word,
                    "expected ',', 'AND' or 'OR' between conditions (quote the value if "
                    "it contains spaces and ':')",
                )
        k += 1
    return k


def _condition_follows(source: str, k: int) -> bool:
    follow = _NEXT_CONDITION.match(source, k)
    return follow is not None and _is_field(follow.group().strip().rstrip(":").strip())


def tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    k, n = 0, len(source)
    while k < n:
        c = source[k]
        if c.isspace():
            k += 1
        elif c in "(),":
            tokens.append(_Token(c, k))
            k += 1
        elif c == "|" and _condition_follows(source, k + 1):
            tokens.append(_Token("or", k, "|"))
            k += 1
        elif c == "~":
            raise QueryError(source, k, "'~' goes after the colon: field:~value")
        elif c in _FIELD_STOP:
            what = "':'" if c == ":" else repr(c)
            raise QueryError(source, k, f"expected a field name before {what}")
        else:
            end = k
            while end < n and source[end] not in _FIELD_STOP:
                end += 1
            word = source[k:end]
            colon = end
            while colon < n and source[colon] in " \t":
                colon += 1
            if colon < n and source[colon] == ":":
                value_start = colon + 1
                value_end = _scan_value(source, value_start)
                raw = source[value_start:value_end]
                tokens.append(_Token("cond", k, canonical_field(word), raw, value_start))
                k = value_end
            elif word.lower() in _WORD_OPERATORS:
                tokens.append(_Token(word.lower(), k, word))
                k = end
            else:
                raise QueryError(
                    source,
                    end,
                    f"expected ':' after field '{clip(word)}' (conditions look like field:value)",
                )
    tokens.append(_Token("end", n))
    return tokens


# ---------------------------------------------------------------- parser


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the query"
    if token.kind in ("and", "or"):
        return f"'{token.text}'"
    return f"'{token.kind}'"


MAX_DEPTH = 50  # nesting a person writes stays far below; a deeper one would exhaust the stack


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.tokens = tokenize(source)
        self.i = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def fail(self, offset: int, reason: str) -> QueryError:
        return QueryError(self.source, offset, reason)

    def parse(self) -> Node:
        node = self.or_expr(None)
        token = self.peek()
        if token.kind == ")":
            raise self.fail(token.pos, "unmatched ')': no '(' is open here")
        if token.kind != "end":  # only after ')': a value already runs up to its joiner
            raise self.fail(token.pos, "expected ',', 'AND' or 'OR' after ')'")
        return node

    def or_expr(self, after: _Token | None) -> Node:
        children = [self.and_expr(after)]
        while self.peek().kind == "or":
            joiner = self.take()
            children.append(self.and_expr(joiner))
        return children[0] if len(children) == 1 else Junction("or", tuple(children))

    def and_expr(self, after: _Token | None) -> Node:
        children = [self.term(after)]
        while self.peek().kind in (",", "and"):
            joiner = self.take()
            children.append(self.term(joiner))
        return children[0] if len(children) == 1 else Junction("and", tuple(children))

    def term(self, after: _Token | None) -> Node:
        token = self.take()
        if token.kind == "cond":
            return Condition(token.text, token.pos, parse_operation(self.source, token))
        if token.kind == "(":
            if self.peek().kind == ")":
                raise self.fail(self.peek().pos, "empty parentheses: expected a condition")
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(token.pos, f"parentheses are nested more than {MAX_DEPTH} deep")
            node = self.or_expr(token)
            self.depth -= 1
            close = self.peek()
            if close.kind in ("cond", "("):  # `((a:b) c:d)`: a joiner is missing after ')'
                raise self.fail(close.pos, "expected ',', 'AND' or 'OR' after ')'")
            if close.kind != ")":
                raise self.fail(
                    close.pos,
                    f"expected ')' to close the '(' at position {token.pos + 1}, found {_describe(close)}",
                )
            self.take()
            return node
        if after is None:
            raise self.fail(
                token.pos, f"expected a condition such as status:running, found {_describe(token)}"
            )
        raise self.fail(
            token.pos,
            f"expected a condition after {_describe(after)}, found {_describe(token)}",
        )


def parse(source: str) -> Node | None:
    """Parse a whole query; None for an empty one (which matches every record)."""
    if not source.strip():
        return None
    return _Parser(source).parse()


# ---------------------------------------------------------------- operations


def _mask(raw: str) -> str:
    """`raw` with every quoted span (quotes included) blanked to NUL, for operator search."""
    out, k = [], 0
    while k < len(raw):
        c = raw[k]
        if c in "\"'":
            end = k + 1
            while end < len(raw) and raw[end] != c:
                end += 2 if raw[end] == "\\" else 1
            out.append("\0" * (min(end, len(raw) - 1) - k + 1))
            k = end + 1
        else:
            out.append(c)
            k += 1
    return "".join(out)[: len(raw)]


def _unquote(raw: str, mask: str) -> str:
    out, k = [], 0
    while k < len(raw):
        if mask[k] != "\0":
            out.append(raw[k])
            k += 1
            continue
        quote, k = raw[k], k + 1
        while k < len(raw) and raw[k] != quote:
            if raw[k] == "\\" and k + 1 < len(raw):
                k += 1
            out.append(raw[k])
            k += 1
        k += 1
    return "".join(out)


class _Span:
    """A slice of one operation's text with its mask and absolute offset."""

    __slots__ = ("mask", "pos", "raw")

    def __init__(self, raw: str, mask: str, pos: int):
        lead = len(mask) - len(mask.lstrip())
        end = len(mask.rstrip())
        self.raw, self.mask, self.pos = raw[lead:end], mask[lead:end], pos + lead

    def cut(self, start: int, end: int | None = None) -> _Span:
        return _Span(self.raw[start:end], self.mask[start:end], self.pos + start)

    def __bool__(self) -> bool:
        return bool(self.raw)


_COMPARISONS = (("<=", "le"), (">=", "ge"), ("<", "lt"), (">", "gt"))


def parse_operation(source: str, token: _Token) -> Operation:
    """Split a condition's text into operator and atoms; the field decides what they mean."""
    span = _Span(token.value, _mask(token.value), token.value_pos)

    def fail(offset: int, reason: str) -> QueryError:
        return QueryError(source, offset, reason)

    if not span:
        raise fail(
            token.value_pos,
            f"expected a value after '{token.text}:' (use {token.text}:nil to match a missing value)",
        )
    negate = span.mask.startswith("~")
    if negate:
        tilde = span.pos
        span = span.cut(1)
        if not span:
            raise fail(tilde + 1, "expected a value after '~'")
        if span.mask.startswith("~"):
            raise fail(span.pos, "'~' can appear only once (it negates the whole operation)")
    if span.mask.lower() == "nil":
        return Operation("nil", negate, (), span.pos)
    for symbol, kind in _COMPARISONS:
        if span.mask.startswith(symbol):
            rest = span.cut(len(symbol))
            if not rest:
                raise fail(span.pos + len(symbol), f"expected a value after '{symbol}'")
            if rest.mask[0] in "<>=":
                raise fail(
                    rest.pos,
                    f"'{symbol}' cannot be followed by another operator "
                    f"'{rest.raw[0]}' (one comparison per condition, e.g. "
                    f"{token.text}:{symbol}0.5)",
                )
            for other in ("|", ".."):
                if other in rest.mask:
                    raise fail(
                        rest.pos + rest.mask.index(other),
                        f"'{symbol}' takes one value; '{other}' cannot follow it",
                    )
            atom = _atom(source, rest, plain=symbol)
            _numeric_metric(source, token, atom, symbol)
            return Operation(kind, negate, (atom,), span.pos)
    if ".." in span.mask:
        cut = span.mask.index("..")
        low, high = span.cut(0, cut), span.cut(cut + 2)
        if ".." in high.mask:
            raise fail(high.pos + high.mask.index(".."), "a range has exactly one '..'")
        if not low:
            raise fail(span.pos + cut, "expected a value before '..' (for an upper bound alone use '<=')")
        if not high:
            raise fail(span.pos + cut + 2, "expected a value after '..' (for a lower bound alone use '>=')")
        for part in (low, high):
            if "|" in part.mask:
                raise fail(part.pos + part.mask.index("|"), "a range cannot contain '|'")
        atoms = (_atom(source, low, plain=".."), _atom(source, high, plain=".."))
        for atom in atoms:
            _numeric_metric(source, token, atom, "..")
        return Operation("range", negate, atoms, span.pos)
    if "|" in span.mask:
        members: list[Atom] = []
        start = 0
        while True:
            bar = span.mask.find("|", start)
            piece = span.cut(start, None if bar < 0 else bar)
            if not piece:
                if bar < 0:
                    raise fail(span.pos + start, "expected a value after '|'")
                side = "before" if start == 0 else "between '|' and"
                raise fail(span.pos + bar, f"expected a value {side} '|'")
            members.append(_atom(source, piece))
            if bar < 0:
                return Operation("set", negate, tuple(members), span.pos)
            start = bar + 1
    return Operation("eq", negate, (_atom(source, span),), span.pos)


def _numeric_metric(source: str, token: _Token, atom: Atom, symbol: str) -> None:
    """Metrics are numbers: comparing one with text would silently match nothing."""
    if token.text.startswith("metrics.") and number(atom) is None:
        raise QueryError(
            source,
            atom.pos,
            f"{token.text} holds numbers; '{symbol}' needs a number, not {clip(atom.text)!r}",
        )


def _atom(source: str, span: _Span, plain: str = "") -> Atom:
    """One value; `plain` names an operator that forbids '%' patterns."""
    prefix = span.mask.startswith("%")
    suffix = len(span.mask) > 1 and span.mask.endswith("%")
    body = span.cut(1 if prefix else 0, -1 if suffix else None)
    if prefix or suffix:
        if plain:
            raise QueryError(source, span.pos, f"'%' patterns cannot be combined with '{plain}'")
        if not body:
            raise QueryError(source, span.pos, "expected text to match next to '%'")
    match = {
        (True, True): "contains",
        (True, False): "endswith",
        (False, True): "startswith",
        (False, False): "exact",
    }[(prefix, suffix)]
    quoted = "\0" in body.mask
    text = _unquote(body.raw, body.mask) if quoted else body.raw
    return Atom(text, quoted, match, span.pos)


# ---------------------------------------------------------------- typed literals

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DURATION = re.compile(
    r"(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?"
    r"(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)
_DURATION_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_DATE = re.compile(
    r"(?P<Y>\d{4})-(?P<M>\d{1,2})(?:-(?P<D>\d{1,2})"
    r"(?:[T ](?P<h>\d{1,2})(?::(?P<m>\d{2})(?::(?P<s>\d{2})(?P<f>\.\d+)?)?)?"
    r"\s*(?P<tz>Z|[+-]\d{2}:?\d{2})?)?)?",
    re.IGNORECASE,
)
DATE_FORMS = "2026-11-21, '2026-11-21 10:00' or 2026-11-21T10:00:00Z"


def number(atom: Atom) -> int | float | None:
    """The atom as a number, or None; a quoted atom is always text (`params.x:"1"`)."""
    if atom.quoted or not _NUMBER.fullmatch(atom.text):
        return None
    try:
        return int(atom.text)
    except ValueError:
        return float(atom.text)


def duration(text: str) -> float | None:
    """Seconds from `90`, `1.5`, `90s`, `30m`, `1h`, `1h30m` or `2d`; None if not a duration."""
    text = text.strip().lower()
    if _NUMBER.fullmatch(text) and not text.startswith(("+", "-")):
        return float(text)
    found = _DURATION.fullmatch(text)
    if not text or not found:
        return None
    return sum(float(v) * _DURATION_UNITS[k] for k, v in found.groupdict().items() if v)


def date_interval(text: str) -> tuple[float, float]:
    """The half-open interval [start, end) in epoch seconds that a written date stands for.

    Precision is what the user wrote: `2026-11` is the month, `2026-11-21` the day,
    `2026-11-21 10:00` the minute. Times without an offset are UTC. Raises ValueError with
    the reason when the text is not a date.
    """
    found = _DATE.fullmatch(text.strip())
    if not found:
        raise ValueError(f"expected a date such as {DATE_FORMS}")
    g = found.groupdict()
    tz = timezone.utc
    if g["tz"] and g["tz"].upper() != "Z":
        sign = -1 if g["tz"][0] == "-" else 1
        digits = g["tz"][1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    fraction = g["f"] or ""
    micros = int((fraction[1:] + "000000")[:6]) if fraction else 0
    start = datetime(
        int(g["Y"]),
        int(g["M"]),
        int(g["D"] or 1),
        int(g["h"] or 0),
        int(g["m"] or 0),
        int(g["s"] or 0),
        micros,
        tzinfo=tz,
    )
    if g["D"] is None:
        year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
        end = start.replace(year=year, month=month)
    elif fraction:
        end = start + timedelta(microseconds=max(1, 10 ** (6 - min(len(fraction) - 1, 6))))
    else:
        unit = next(
            u
            for u, key in (("seconds", "s"), ("minutes", "m"), ("hours", "h"), ("days", "D"))
            if g[key] is not None
        )
        end = start + timedelta(**{unit: 1})
    return start.timestamp(), end.timestamp()
