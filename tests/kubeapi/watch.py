"""Watch streams: the events a `?watch=true` request receives, read from the store's history."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from .errors import ApiError
from .resources import ResourceType
from .selectors import fields_match, labels_match, parse_field_selector, parse_label_selector
from .store import Store


def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version,
                                           "metadata": meta}}


def watch_events(store: Store, rt: ResourceType, namespace: str | None, *,
                 label_selector: str | None = None, field_selector: str | None = None,
                 resource_version: str | None = None, send_initial_events: bool = False,
                 allow_bookmarks: bool = False, timeout: float = 1800.0,
                 bookmark_interval: float = 5.0,
                 stop: threading.Event | None = None) -> Iterator[dict[str, Any]]:
    """Yield watch events until the timeout, `stop`, or an ERROR event (e.g. 410 Expired).

    Selector semantics follow the API server: an object that stops matching arrives as
    DELETED, one that starts matching as ADDED.
    """
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector, rt.kind)

    def matches(obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if namespace and obj["metadata"].get("namespace") != namespace:
            return False
        return labels_match(labels, obj) and fields_match(fields, obj)

    deadline = time.monotonic() + timeout
    stop = stop or threading.Event()
    with store.lock:
        if resource_version in (None, "", "0") or send_initial_events:
            cursor = store.resource_version
            initial = [o for o in store.list(rt.key, namespace or None) if matches(o)]
        else:
            try:
                cursor = int(resource_version)
            except ValueError:
                yield {"type": "ERROR", "object": ApiError(
                    400, f"invalid resource version: {resource_version}").status()}
                return
            initial = []
    for obj in initial:
        yield {"type": "ADDED", "object": obj}
    if send_initial_events and allow_bookmarks:
        yield _bookmark(rt, cursor, initial_end=True)
    last_bookmark = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now >= deadline:
            return
        with store.changed:
            try:
                changes = store.changes_after(cursor)
            except ApiError as exc:
                yield {"type": "ERROR", "object": exc.status()}
                return
            if not changes:
                wait = min(deadline - now, 0.5)
                if allow_bookmarks:
                    wait = max(0.0, min(wait, last_bookmark + bookmark_interval - now))
                store.changed.wait(wait)
        for change in changes:
            cursor = change.rv
            if change.resource != rt.key:
                continue
            now_matches, old_matched = matches(change.obj), matches(change.old)
            if change.type == "DELETED":
                event_type = "DELETED" if old_matched else None
            elif now_matches:
                event_type = "MODIFIED" if change.type == "MODIFIED" and old_matched else "ADDED"
            else:
                event_type = "DELETED" if old_matched else None
            if event_type:
                yield {"type": event_type, "object": change.obj}
        if allow_bookmarks and time.monotonic() - last_bookmark >= bookmark_interval:
            last_bookmark = time.monotonic()
            yield _bookmark(rt, max(cursor, store.resource_version))
