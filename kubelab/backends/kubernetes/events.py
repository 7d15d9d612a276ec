"""A run's Kubernetes events as records: what the sidebar's event list and `kubelab get` show.

The watcher appends each event to the run's `k8s-events.jsonl`; a reader keeps the latest
copy of each (an event's count goes up in place) in time order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubelab.backends.kubernetes.api import KubeApi

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


def append_event(run_path: Path, event: Obj) -> None:
    """Keep an event the watch saw in the run's EVENTS_FILE (one JSON line)."""
    with open(run_path / EVENTS_FILE, "a") as handle:
        handle.write(json.dumps(event_record(event)) + "\n")


def read_events(run_path: Path) -> list[dict[str, Any]]:
    """The run's kept events, the latest copy of each, oldest first."""
    lines = (run_path / EVENTS_FILE).read_text().splitlines()
    return dedupe([json.loads(line) for line in lines if line])


def fetch_events(api: KubeApi, objects: list[Obj]) -> list[Obj]:
    """The namespace's events about `objects` (a run's Job and pods), oldest first, from the API."""
    wanted = {o["metadata"]["name"] for o in objects}
    items = api.list("Event").get("items") or []
    return sorted((e for e in items if (e.get("involvedObject") or {}).get("name") in wanted), key=event_time)
