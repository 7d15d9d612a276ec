"""Container logs: lines appended by tests, read (or followed) through `pods/<name>/log`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from .cluster import Cluster
from .errors import bad_request, not_found

_WAITING_MESSAGES = {"ErrImagePull": "trying and failing to pull image",
                     "ImagePullBackOff": "image can't be pulled"}


def _container_state(pod: dict[str, Any], container: str) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == container:
            return status.get("state") or {}
    return {}


def resolve_container(cluster: Cluster, namespace: str, name: str,
                      container: str | None) -> str:
    """The container to read, with the kubelet's 400s for ambiguous or not-started ones."""
    pod = cluster.store.get("pods", namespace, name)
    if pod is None:
        raise not_found("pods", "", name)
    names = [c["name"] for c in pod["spec"].get("containers") or []]
    init_names = [c["name"] for c in pod["spec"].get("initContainers") or []]
    if not container:
        if len(names) != 1:
            message = (f"a container name must be specified for pod {name}, choose one of: "
                       f"[{' '.join(names)}]")
            if init_names:
                message += f" or one of the init containers: [{' '.join(init_names)}]"
            raise bad_request(message)
        container = names[0]
    if container not in names + init_names:
        raise bad_request(f"container {container} is not valid for pod {name}")
    state = _container_state(pod, container)
    if "running" not in state and "terminated" not in state:
        reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
        detail = _WAITING_MESSAGES.get(reason, reason)
        raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                          f"{detail}")
    return container


def append(cluster: Cluster, namespace: str, pod: str, container: str, lines: list[str]) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
    with cluster.store.changed:
        buffer = cluster.logs.setdefault((namespace, pod, container), [])
        for text in lines:
            buffer.extend((stamp, part) for part in text.split("\n"))
        cluster.store.changed.notify_all()


def read(cluster: Cluster, namespace: str, pod: str, container: str, *, follow: bool = False,
         tail_lines: int | None = None, timestamps: bool = False,
         stop: threading.Event | None = None) -> Iterator[str]:
    """Yield log lines (with newline); when following, until the container terminates."""
    stop = stop or threading.Event()
    key = (namespace, pod, container)
    with cluster.lock:
        lines = cluster.logs.get(key, [])
        start = max(0, len(lines) - tail_lines) if tail_lines is not None else 0
    position = start
    while True:
        with cluster.store.changed:
            lines = cluster.logs.get(key, [])
            batch = lines[position:]
            position = len(lines)
            current = cluster.store.get("pods", namespace, pod)
            over = current is None or "terminated" in _container_state(current, container)
            if follow and not batch and not over and not stop.is_set():
                cluster.store.changed.wait(0.5)
                continue
        for stamp, text in batch:
            yield f"{stamp} {text}\n" if timestamps else f"{text}\n"
        if not follow or (over and not batch) or stop.is_set():
            return
