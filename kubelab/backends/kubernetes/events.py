"""A run's Kubernetes events as records: what the sidebar's event list and `kubelab get` show.

The watcher appends each event to the run's `k8s-events.jsonl`; a reader keeps the latest
copy of each (an event's count goes up in place) in time order.
"""

from __future__ import annotations

from typing import Any

EVENTS_FILE = "k8s-events.jsonl"
Obj = dict[str, Any]


def event_record(event: Obj) -> dict[str, Any]:
    involved = event.get("involvedObject") or {}
    return {
        "time": event_time(event),
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": event.get("message"),
        "count": event.get("count") or 1,
        "object": f"{involved.get('kind')}/{involved.get('name')}",
        "uid": (event.get("metadata") or {}).get("uid"),
    }


def dedupe(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    latest: dict[Any, dict[str, Any]] = {}
    for record in records:
        latest[record.get("uid") or id(record)] = record
    return sorted(latest.values(), key=lambda r: r.get("time") or "")


def event_time(event: Obj) -> str:
    return (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
