"""What the `kubelab` commands print: a record as JSON or YAML, tables, and lines of text.

Everything they print passes through `clean`: run names, reasons, params and paths come from
users (or from a pipeline shared as a template), and a terminal obeys what they hold. An escape
sequence can retitle the window, clear the screen or rewrite what was printed before; a
right-to-left override makes `evil.py` read as something else. So control characters (C0 but
newline between lines, DEL, C1) and Unicode's bidirectional and invisible format characters are
shown as `\\x1b`, `\\u202e`... instead. A run's log (`kubelab logs`) is its program's own output
and is passed through as it is, as `cat` would.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from typing import IO, Any


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(char: str) -> bool:
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0 or unicodedata.category(char) == "Cf"


def clean(value: Any) -> str:
    """`value` as text a terminal shows rather than obeys (one line: a newline is escaped too)."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(_escape(c) if _unsafe(c) else c for c in text)


def say(*parts: Any, sep: str = " ", file: IO[str] | None = None, flush: bool = False) -> None:
    """`print` for the commands: each line of the text cleaned, the lines kept."""
    text = sep.join(str(p) for p in parts)
    print("\n".join(clean(line) for line in text.split("\n")), file=file or sys.stdout, flush=flush)


def emit(data: Any, output: str | None) -> None:
    if output == "yaml":
        import yaml

        say(yaml.safe_dump(data, sort_keys=False).rstrip())
    else:
        say(json.dumps(data, indent=2, default=str))


def grid(rows: list[tuple[Any, ...]]) -> str:
    """Rows as aligned columns, each cell cleaned (a newline in a name cannot forge a row)."""
    text = [[clean(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in text) for i in range(len(text[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in text)


def table(records: list[dict[str, Any]], params: list[str] | None = None) -> str:
    """The `kubelab ls` table; TAGS and NOTE when any run has them, a column per asked parameter."""
    params = params or []
    labels = any(r.get("tags") or r.get("note") for r in records)
    header = ("ID", "NAME", "STATUS", "STARTED", "DURATION", *(p.upper() for p in params), "METRICS")
    rows: list[tuple[Any, ...]] = [header + ("TAGS", "NOTE") * labels]
    for r in records:
        metrics = ", ".join(f"{k}={_short(v)}" for k, v in list((r.get("metrics") or {}).items())[:3])
        started = (r.get("started_at") or "")[:19].replace("T", " ")
        duration = f"{r['duration']:.1f}s" if r.get("duration") is not None else ""
        values = [_short((r.get("params") or {}).get(p, "")) for p in params]
        row = (r["id"], clean(r["name"])[:30], r["status"], started, duration, *values, metrics)
        rows.append(row + (",".join(r.get("tags") or []), clean(r.get("note") or "")[:40]) * labels)
    return grid(rows)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
