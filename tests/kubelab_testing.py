"""Helpers shared by kubelab's test suites (the `tests/` folder is on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any, Protocol

from kubernetes import client

TERMINAL = ("Succeeded", "Failed", "Stopped", "Pruned")


class Lab(Protocol):
    """What `wait_until` reads of a lab: a run's record by id."""

    def get(self, run_id: str) -> dict[str, Any]: ...


def wait_until(
    lab: Lab, run_id: str, states: Collection[str] = TERMINAL, timeout: float = 60.0, reason: str = ""
) -> dict[str, Any]:
    """Poll `lab.get` until the run reaches one of `states` (with `reason` in its reason)."""
    deadline = time.monotonic() + timeout
    record = None
    while time.monotonic() < deadline:
        record = lab.get(run_id)
        if record["status"] in states and reason in record["reason"]:
            return record
        time.sleep(0.05)
    raise AssertionError(f"{run_id} never reached {states}; last: {record}")


def manifest(obj: Mapping[str, Any]) -> Any:
    """A plain Kubernetes object where the client's annotations name its model class: the client
    sends a mapping as it sends a model (`ApiClient.sanitize_for_serialization`)."""
    return obj


def plain(model: object) -> dict[str, Any]:
    """A Kubernetes client model (or a list's reply) as the API server's JSON, camelCase keys
    and unset fields left out: the client's models type every field Optional, so tests read
    what they assert on this way (`plain(pod)["metadata"]["name"]`)."""
    data: dict[str, Any] = client.ApiClient().sanitize_for_serialization(model)
    return data
