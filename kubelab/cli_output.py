"""What the `kubelab` commands print: a record as JSON or YAML, and the runs table."""

from __future__ import annotations

import json
from typing import Any


def emit(data: Any, output: str | None) -> None:
    if output == "yaml":
        import yaml

        print(yaml.safe_dump(data, sort_keys=False).rstrip())
    else:
        print(json.dumps(data, indent=2, default=str))


def table(records: list[dict[str, Any]]) -> str:
    columns = ("ID", "NAME", "STATUS", "STARTED", "DURATION", "METRICS")
    rows = [columns]
    for r in records:
        metrics = ", ".join(f"{k}={_short(v)}" for k, v in list((r.get("metrics") or {}).items())[:3])
        started = (r.get("started_at") or "")[:19].replace("T", " ")
        duration = f"{r['duration']:.1f}s" if r.get("duration") is not None else ""
        rows.append((r["id"], r["name"][:30], r["status"], started, duration, metrics))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(columns))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
