"""PQL text -> a small tree of conditions; `kubelab.query.compiler` turns the tree into closures.

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
from typing import NamedTuple

from kubelab.query.aliases import canonical_field
from kubelab.query.literals import number
from kubelab.query.syntax import Atom, Condition, Junction, Node, Operation, QueryError, clip
from kubelab.query.values import FIELDS, SECTIONS

# QueryError is where docs/query.md says it is (it is defined in kubelab.query.syntax).
__all__ = ["QueryError", "parse", "parse_operation", "tokenize"]

# ---------------------------------------------------------------- Polyaxon's names


def _is_field(word: str) -> bool:
    """True when `word` names a field, so `a:x | word:y` starts a condition, not a value."""
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
