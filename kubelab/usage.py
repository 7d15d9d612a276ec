"""`kubelab usage`: GPU-hours, energy and mean utilisation, summed from the run records.

Each record carries its run's `system.*` sums (kubelab/system_metrics.py), so usage is a fold
over records the user may already read: by user, by GPU type, or by status, since a time. The
mean utilisation is weighted by GPU-hours, so a long run counts for what it held. Runs with
nothing measured (no GPU, simulated GPUs) count as runs, not as zero utilisation.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubelab.cli_output import emit, grid, say
from kubelab.errors import FieldError, ValidationError
from kubelab.quantity import parse_duration
from kubelab.records import parse_iso


def _user(record: dict[str, Any]) -> str:
    return str(record.get("user") or "(unknown)")


def _gpu_type(record: dict[str, Any]) -> str:
    return str((record.get("resources") or {}).get("gpu_type") or "(any)")


def _status(record: dict[str, Any]) -> str:
    return str(record.get("status") or "")


BY: dict[str, Callable[[dict[str, Any]], str]] = {"user": _user, "type": _gpu_type, "status": _status}


@dataclass
class Usage:
    key: str
    runs: int = 0
    gpu_hours: float = 0.0
    energy_wh: float = 0.0
    weighted_util: float = 0.0  # utilisation x GPU-hours, for the weighted mean
    measured_hours: float = 0.0

    @property
    def gpu_util(self) -> float | None:
        return self.weighted_util / self.measured_hours if self.measured_hours else None

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "runs": self.runs,
            "gpu_hours": round(self.gpu_hours, 4),
            "energy_wh": round(self.energy_wh, 3),
            "gpu_util": None if self.gpu_util is None else round(self.gpu_util, 1),
        }


def usage(records: list[dict[str, Any]], by: str = "user", since: float | None = None) -> list[Usage]:
    """Sums per `by` value, largest GPU-hours first; `since` (epoch seconds) drops older runs."""
    if by not in BY:
        raise ValidationError("cannot sum usage", [FieldError("by", f"must be one of {', '.join(BY)}")])
    key_of = BY[by]
    table: dict[str, Usage] = {}
    for record in records:
        if since is not None and parse_iso(record.get("created_at") or "1970-01-01T00:00:00Z") < since:
            continue
        key = key_of(record)
        entry = table.setdefault(key, Usage(key))
        entry.runs += 1
        system = record.get("system") or {}
        hours = system.get("gpu_hours")
        if isinstance(hours, (int, float)):
            entry.gpu_hours += hours
            if isinstance(system.get("gpu_util"), (int, float)):
                entry.weighted_util += system["gpu_util"] * hours
                entry.measured_hours += hours
        if isinstance(system.get("energy_wh"), (int, float)):
            entry.energy_wh += system["energy_wh"]
    return sorted(table.values(), key=lambda u: (-u.gpu_hours, u.key))


def since_time(text: str, now: float | None = None) -> float:
    """The epoch second `text` (a period such as 7d or 12h) before now; refused by name."""
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ValidationError("cannot sum usage", [FieldError("since", str(exc))]) from None
    if not 0 < seconds < 100 * 365 * 86400:
        raise ValidationError(
            "cannot sum usage", [FieldError("since", "must be a period from 1s to 100 years")]
        )
    return (time.time() if now is None else now) - seconds


def total(records: list[dict[str, Any]], since: float | None = None) -> Usage:
    """Everything in `records` since then summed as one row (a user's own: "My usage")."""
    everything = usage([{**record, "user": "all"} for record in records], "user", since)
    return everything[0] if everything else Usage("all")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "usage",
        help="GPU-hours, energy and mean GPU utilisation of your runs",
        description="GPU-hours, energy and mean GPU utilisation, summed from the run records.",
    )
    p.set_defaults(handler=cmd_usage)
    p.add_argument("--by", choices=tuple(BY), default="user")
    p.add_argument("--since", help="only runs created in this past period, e.g. 7d, 12h")
    p.add_argument("-o", "--output", choices=("json",))


def cmd_usage(args: argparse.Namespace) -> int:
    from kubelab.experiments import Experiments

    since = since_time(args.since) if args.since else None
    records, _ = Experiments().list("", "", None)
    rows = usage(records, args.by, since)
    if args.output == "json":
        emit([row.as_json() for row in rows], "json")
        return 0
    table: list[tuple[Any, ...]] = [(args.by.upper(), "RUNS", "GPU-HOURS", "ENERGY (WH)", "MEAN GPU UTIL")]
    for row in rows:
        util = "" if row.gpu_util is None else f"{row.gpu_util:.0f}%"
        table.append((row.key, row.runs, f"{row.gpu_hours:.2f}", f"{row.energy_wh:.1f}", util))
    say(grid(table))
    return 0
