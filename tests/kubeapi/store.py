"""Versioned object storage with a bounded change history, the part etcd plays for the server.

Every write gets the next cluster-wide resourceVersion and is appended to the history that
watches read from. The history keeps the last `history_size` events; resuming a watch from an
older version gets `410 Expired`, exactly the condition clients must handle after compaction.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import expired

Key = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True)
class Change:
    """One entry of the history: what a watch stream turns into an event."""

    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str  # ResourceType.key
    obj: dict[str, Any]
    old: dict[str, Any] | None


class Store:
    """Objects by resource and key. Stored dicts are never mutated: writers store new dicts."""

    def __init__(self, history_size: int = 10_000, first_rv: int = 1000) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._objects: dict[str, dict[Key, dict[str, Any]]] = {}
        self._rv = first_rv
        self._history: deque[Change] = deque()
        self.history_size = history_size
        self._compacted = first_rv  # events at or below this version may be gone

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get(resource, {}).get((namespace, name))

    def list(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        bucket = self._objects.get(resource, {})
        return [obj for (ns, _), obj in sorted(bucket.items())
                if namespace is None or ns == namespace]

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store `obj` (ADDED or MODIFIED) with a fresh resourceVersion; returns it."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        with self.lock:
            old = self._objects.get(resource, {}).get(key)
            self._rv += 1
            meta["resourceVersion"] = str(self._rv)
            self._objects.setdefault(resource, {})[key] = obj
            self._record(Change(self._rv, "MODIFIED" if old else "ADDED", resource, obj, old))
        return obj

    def remove(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """Delete; the DELETED event carries the last state at a new resourceVersion."""
        with self.lock:
            old = self._objects.get(resource, {}).pop((namespace, name), None)
            if old is None:
                return None
            self._rv += 1
            last = dict(old, metadata=dict(old["metadata"], resourceVersion=str(self._rv)))
            self._record(Change(self._rv, "DELETED", resource, last, old))
            return last

    def _record(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self.history_size:
            self._compacted = self._history.popleft().rv
        self.changed.notify_all()

    def compact(self) -> None:
        """Forget all history now (like an etcd compaction): older watch resumes get 410."""
        with self.lock:
            self._history.clear()
            self._compacted = self._rv

    def changes_after(self, rv: int) -> list[Change]:
        """History entries newer than `rv`; 410 if some of them were already compacted."""
        with self.lock:
            if rv < self._compacted:
                raise expired(f"too old resource version: {rv} ({self._compacted + 1})")
            out: list[Change] = []
            for change in reversed(self._history):
                if change.rv <= rv:
                    break
                out.append(change)
            out.reverse()
            return out

    def all_objects(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for resource, bucket in self._objects.items():
            for obj in bucket.values():
                yield resource, obj
