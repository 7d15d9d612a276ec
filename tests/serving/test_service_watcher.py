"""The server's event stream learns of services from their folders: a real supervisor's state
changes are `service` events, a removed service a `service_deleted` one."""

from __future__ import annotations

from typing import Any

from serving_support import poll

from kubelab.serving.service import Services
from kubelab.serving.watcher import ServiceWatcher


def test_the_watcher_sees_a_service_start_stop_and_go(services: Services) -> None:
    before = services.wait(services.start({"name": "old", "command": ["sleep", "60"]})["id"])
    watcher = ServiceWatcher(services)
    watcher.start()
    assert watcher.poll() == ([], [])  # what existed before it started is no news

    seen: list[dict[str, Any]] = []

    def reached(state: str) -> bool:
        changed, removed = watcher.poll()
        assert removed == []
        seen.extend(changed)
        return any(view["id"] == "web-v1" and view["state"] == state for view in seen)

    command = "exec python3 -m http.server {{ port }} --bind 127.0.0.1"
    services.start({"name": "web", "command": command})
    poll(lambda: reached("Running"), what="web-v1 Running as an event")
    assert all(view["id"] == "web-v1" for view in seen)  # the old service did not change
    services.stop("web-v1")
    poll(lambda: reached("Stopped"), what="web-v1 Stopped as an event")
    services.delete("web-v1")
    services.delete(before["id"])
    removed = poll(lambda: watcher.poll()[1], what="the deletions")
    assert sorted(removed) == ["old-v1", "web-v1"]
    assert watcher.poll() == ([], [])
