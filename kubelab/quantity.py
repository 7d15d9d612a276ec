"""Kubernetes resource quantities and human durations.

Specs keep quantities as the strings users wrote (so rendered manifests read the
same); these helpers check them and turn them into numbers where a number is needed.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decimal import Decimal

_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|([eE][+-]?\d+))?$")
MAX_EXPONENT = 18  # Kubernetes stores quantities as 64-bit integers (of milli-units at most)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: str | int | float) -> Decimal:
    """The value of a Kubernetes quantity (`"500m"` → 0.5, `"4Gi"` → 4294967296).

    Raises ValueError with a sentence a user can act on.
    """
    from decimal import Decimal, InvalidOperation  # imported on use: trials never need it

    if isinstance(value, bool):
        raise ValueError("must be a quantity such as '2', '500m' or '4Gi', not a boolean")
    if isinstance(value, (int, float)):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"must be a quantity such as '2', '500m' or '4Gi', not {type(value).__name__}")
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"'{value}' is not a Kubernetes quantity (examples: '2', '500m', '4Gi', '1.5G')")
    number, suffix, exponent = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"'{value}' is not a number") from exc
    if base < 0:
        raise ValueError(f"'{value}' is negative")
    if exponent:
        power = int(exponent[1:]) if len(exponent) <= 6 else 10**6
        if abs(power) > MAX_EXPONENT:
            raise ValueError(f"'{value}' is out of range: Kubernetes quantities go up to about 9.2e18")
        return base * Decimal(10) ** power
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * Decimal(10) ** _DECIMAL[suffix or ""]


def format_quantity(value: str | int | float) -> str:
    """A quantity as Kubernetes prints it in a manifest (numbers become strings)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


MAX_SECONDS = 3650 * 86400  # ten years: any longer is a typo, and beyond a float it cannot compute
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(value: str | int | float) -> float:
    """Seconds in a duration: `3600`, `"90s"`, `"30m"`, `"1h30m"`, `"2d"`."""
    if isinstance(value, bool):
        raise ValueError("must be a duration such as 3600, '30m' or '1h30m', not a boolean")
    if isinstance(value, (int, float)):
        seconds = float(value) if abs(value) <= MAX_SECONDS else math.inf  # 10**400: no float
    elif isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        else:
            match = _DURATION.match(text)
            if not text or not match or not any(match.groups()):
                raise ValueError(f"'{value}' is not a duration (examples: 3600, '90s', '30m', '1h30m', '2d')")
            d, h, m, s = match.groups()
            try:
                seconds = int(d or 0) * 86400 + int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0)
            except OverflowError:
                seconds = math.inf
    else:
        raise ValueError(f"must be a duration such as 3600 or '1h30m', not {type(value).__name__}")
    if seconds != seconds or seconds > MAX_SECONDS:
        limit = MAX_SECONDS // 86400
        raise ValueError(f"'{clip(value)}' is longer than {limit} days, kubelab's longest duration")
    if seconds <= 0:
        raise ValueError("must be longer than zero seconds")
    return seconds


def clip(value: object, width: int = 40) -> str:
    text = str(value) if not isinstance(value, int) or abs(value) < 10**width else f"{str(value)[:12]}…"
    return text if len(text) <= width else text[: width - 1] + "…"
