"""Fixtures for the spawner tests: a stand-in for single-user servers inside pods.

The Kubernetes API test server has no kubelet and runs no containers. When a test marks a
notebook pod Running with pod IP 127.0.0.1, KubeSpawner returns `http://127.0.0.1:<port>`,
and JupyterHub then waits for an HTTP answer there (any non-5xx will do) before it routes the
user. This responder gives that answer and records the paths it was asked for, so a test
can check the hub's proxy really sent the user to "the pod".
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        body = b'{"stand-in": "single-user server"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class PodStandIn:
    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.paths = []  # type: ignore[attr-defined]
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def paths(self) -> list[str]:
        paths: list[str] = self.httpd.paths  # type: ignore[attr-defined]
        return paths


@pytest.fixture(scope="module")
def pod_stand_in() -> Iterator[PodStandIn]:
    stand_in = PodStandIn()
    stand_in.thread.start()
    yield stand_in
    stand_in.httpd.shutdown()
    stand_in.httpd.server_close()
