"""PQL's typed literals: numbers, durations (`1h30m`) and dates or date intervals.

Standard library only, like the parser: the query language sits on listing hot paths.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from kubelab.query.syntax import Atom

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
