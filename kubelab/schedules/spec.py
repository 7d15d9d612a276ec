"""A schedule: `{cron, timezone, concurrency, start, end}` on an experiment, sweep or pipeline.

Cron strings are read by croniter (five fields, or six with seconds), never by a parser of
our own; time zones are IANA names read by `zoneinfo`. `next_after` is the one place that
turns a schedule into fire times, so the local scheduler, the CronJob builder and the
tests agree on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from kubelab.errors import FieldError, did_you_mean

CONCURRENCY = ("forbid", "allow", "replace")
FIELDS = ("cron", "timezone", "concurrency", "start", "end")


@dataclass
class Schedule:
    cron: str
    timezone: str = "UTC"
    concurrency: str = "forbid"  # forbid: skip a fire while the last one runs; replace: stop it
    start: float | None = None  # epoch seconds; no fire before
    end: float | None = None  # epoch seconds; no fire after

    def to_dict(self) -> dict[str, Any]:
        return {
            "cron": self.cron,
            "timezone": self.timezone,
            "concurrency": self.concurrency,
            "start": _iso(self.start),
            "end": _iso(self.end),
        }

    def latest_until(self, moment: float) -> float | None:
        """The last fire time at or before `moment` (and before `end`), or None before `start`."""
        from zoneinfo import ZoneInfo

        from croniter import croniter

        if self.end is not None:
            moment = min(moment, self.end)
        # croniter's get_prev is strictly before its start: a millisecond later keeps `moment`
        begin = datetime.fromtimestamp(moment + 0.001, ZoneInfo(self.timezone))
        fire = croniter(self.cron, begin).get_prev(datetime).timestamp()
        if self.start is not None and fire < self.start:
            return None
        return fire

    def next_after(self, moment: float) -> float | None:
        """The first fire time strictly after `moment` (epoch seconds), or None past `end`."""
        from zoneinfo import ZoneInfo

        from croniter import croniter

        zone = ZoneInfo(self.timezone)
        begin = max(moment, self.start - 1e-6) if self.start is not None else moment
        fire = croniter(self.cron, datetime.fromtimestamp(begin, zone)).get_next(datetime).timestamp()
        if self.end is not None and fire > self.end:
            return None
        return fire


def parse_schedule(data: Any, path: str = "schedule") -> tuple[Schedule | None, list[FieldError]]:
    """A Schedule from a mapping (or a bare cron string), and every problem found."""
    if data is None:
        return None, []
    if isinstance(data, str):
        data = {"cron": data}
    if not isinstance(data, dict):
        return None, [FieldError(path, "must be a mapping with at least 'cron', or a cron string")]
    errors = [
        FieldError(f"{path}.{k}", "unknown field" + did_you_mean(str(k), FIELDS))
        for k in data
        if k not in FIELDS
    ]
    given = data.get("cron")
    cron = " ".join(given.split()) if isinstance(given, str) else ""
    if not cron:
        errors.append(FieldError(f"{path}.cron", "is required: a cron string such as '0 2 * * *'"))
    else:
        from croniter import croniter

        if not croniter.is_valid(cron):
            errors.append(
                FieldError(
                    f"{path}.cron",
                    f"'{cron}' is not a valid cron expression "
                    "(five fields: minute hour day-of-month month day-of-week, "
                    "or six with seconds last)",
                )
            )
    zone = data.get("timezone") or "UTC"
    if not _valid_zone(zone):
        errors.append(
            FieldError(
                f"{path}.timezone", f"'{zone}' is not an IANA time zone such as 'Europe/Berlin' or 'UTC'"
            )
        )
    concurrency = data.get("concurrency") or "forbid"
    if concurrency not in CONCURRENCY:
        errors.append(
            FieldError(
                f"{path}.concurrency",
                f"must be one of {', '.join(CONCURRENCY)}, "
                f"not {concurrency!r}" + did_you_mean(str(concurrency), CONCURRENCY),
            )
        )
    bounds = {}
    for key in ("start", "end"):
        bounds[key], problem = _moment(data.get(key))
        if problem:
            errors.append(FieldError(f"{path}.{key}", problem))
    if bounds["start"] is not None and bounds["end"] is not None and bounds["end"] <= bounds["start"]:
        errors.append(FieldError(f"{path}.end", "must be after start"))
    if errors:
        return None, errors
    return Schedule(cron, zone, concurrency, bounds["start"], bounds["end"]), []


def _valid_zone(name: Any) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(name, str) or not name or name.startswith(("/", ".")) or ".." in name:
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _moment(value: Any) -> tuple[float | None, str]:
    """Epoch seconds from an ISO-8601 string or a YAML datetime (naive means UTC)."""
    if value is None:
        return None, ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None, f"'{value}' is not an ISO-8601 time such as 2026-01-31T02:00:00Z"
    if not isinstance(value, datetime):
        return None, "must be an ISO-8601 time such as 2026-01-31T02:00:00Z"
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp(), ""


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
