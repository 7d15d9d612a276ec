"""Helpers shared by kubelab's test suites (the `tests/` folder is on sys.path)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Protocol

from kubernetes import client

from kubelab.records import TERMINAL


class Lab(Protocol):
    """What `wait_until` reads of a lab: a run's record by id."""

    def get(self, run_id: str) -> dict[str, Any]: ...


def wait_until(
    lab: Lab, run_id: str, states: str | Collection[str] = TERMINAL, timeout: float = 60.0, reason: str = ""
) -> dict[str, Any]:
    """Poll `lab.get` until the run reaches `states` (one, or one of several), with `reason` in its
    reason; the record it reached."""
    if isinstance(states, str):
        states = (states,)  # not a substring test: "Run" in "Running"
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


class JsonStandIn:
    """A stand-in HTTP service on loopback (a hub's API, Prometheus, a notebook pod's server): it
    answers every GET with `answer(path)` as JSON and records the paths it was asked for.

    `with JsonStandIn(answer) as stand_in:` serves on `stand_in.url` until the block ends.
    """

    def __init__(self, answer: Callable[[str], object]) -> None:
        self.answer = answer
        self.paths: list[str] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                stand_in.paths.append(self.path)
                body = json.dumps(stand_in.answer(self.path)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> JsonStandIn:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
