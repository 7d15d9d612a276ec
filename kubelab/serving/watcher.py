"""For the server's event stream: which of this machine's services changed since the last look.

A service's supervisor is a process of its own that writes `state.json` as replicas start,
answer, crash and restart; the server's event hub polls a `ServiceWatcher` from its thread and
sends each changed service's view (`service` events) and each removed one's id
(`service_deleted`), so the sidebar follows without polling. A look costs a directory listing
and one `stat` per service. Services on a cluster have no folder here: their views are read
when the sidebar lists them.
"""

from __future__ import annotations

from typing import Any

from kubelab.serving.service import Services


class ServiceWatcher:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.stamps: dict[str, int | None] = {}

    def start(self) -> None:
        """Only later changes are events: note what exists now."""
        self.stamps = {d.id: d.state_mtime() for d in self.services.store.all()}

    def poll(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The views of the services whose state changed (new ones included), and the ids of
        those whose folder is gone."""
        changed, seen = [], set()
        for directory in self.services.store.all():
            seen.add(directory.id)
            stamp = directory.state_mtime()
            if stamp == self.stamps.get(directory.id, -1):
                continue
            self.stamps[directory.id] = stamp
            try:
                changed.append(self.services.get(directory.id))
            except (OSError, ValueError, KeyError):  # being created or deleted right now
                self.stamps.pop(directory.id, None)
        removed = [sid for sid in self.stamps if sid not in seen]
        for sid in removed:
            del self.stamps[sid]
        return changed, removed
