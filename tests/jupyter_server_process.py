"""A real Jupyter server with kubelab, started as a subprocess on a free port.

Shared by the REST, sweep, notebook and browser tests: nothing is mocked, the server is
the one users run, with the extension enabled the way the wheel enables it.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import requests

from kubelab.records import TERMINAL


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PortTaken(RuntimeError):
    """Another process bound the port between our choice and the server's bind."""


class JupyterServer:
    """`with JupyterServer(root, home) as server: server.get("experiments")`."""

    def __init__(
        self,
        root: Path,
        home: Path,
        app: str = "server",
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
    ) -> None:
        self.root, self.home = Path(root), Path(home)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}/"
        self.api = self.url + "kubelab/api/"
        self.app = app
        self.extra = extra or []
        self.env = {**os.environ, "KUBELAB_HOME": str(self.home), **(env or {})}
        self.env.pop("KUBELAB_API_URL", None)
        self.env.pop("KUBELAB_API_TOKEN", None)
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.root.parent / f"jupyter-{self.port}.log"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "jupyterlab" if self.app == "lab" else "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={self.port}",
            "--ip=127.0.0.1",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.jpserver_extensions=kubelab.server_extension=True",
            *self.extra,
        ]

    def start(self, attempts: int = 3) -> JupyterServer:
        """Start on a free port; on another one when the chosen port was taken meanwhile."""
        for attempt in range(attempts):
            try:
                return self._start()
            except PortTaken:
                if attempt == attempts - 1:
                    raise
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}/"
                self.api = self.url + "kubelab/api/"
                self.log = self.root.parent / f"jupyter-{self.port}.log"
        raise AssertionError("unreachable")

    def _start(self) -> JupyterServer:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.command(), env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.root
            )
        deadline = time.monotonic() + 120  # a loaded 2-core machine starts it in 60 s at worst
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                if "is already in use" in self.log.read_text():
                    raise PortTaken(self.port)
                raise RuntimeError(f"jupyter exited early:\n{self.log.read_text()[-3000:]}")
            try:
                if self.get("resources").status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"jupyter did not answer in time:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop_work(self) -> None:
        """Stop what this server still runs for the test: its schedules (paused, so their
        scheduler exits), sweeps (no new trials), pipelines and experiments. Their processes
        outlive the server by design, so a fixture that does not stop them leaves them running
        after the test."""
        for schedule in self.get("schedules").json().get("items", []):
            if not schedule.get("paused"):
                self.post(f"schedules/{schedule['id']}/pause")
        for kind in ("sweeps", "pipelines", "experiments"):
            for item in self.get(kind).json().get("items", []):
                if item.get("status") not in TERMINAL:
                    self.post(f"{kind}/{item['id']}/stop")

    def __enter__(self) -> JupyterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    def page(self, path: str, token: bool = True, **kwargs: Any) -> requests.Response:
        """A browser-side path (not under /kubelab/api), with or without the token."""
        headers = self.headers if token else {}
        kwargs.setdefault("allow_redirects", False)
        return requests.get(self.url + path.lstrip("/"), headers=headers, timeout=60, **kwargs)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.get(self.api + path, headers=self.headers, timeout=30, **kwargs)

    def post(self, path: str, body: object = None, **kwargs: Any) -> requests.Response:
        return requests.post(self.api + path, headers=self.headers, json=body, timeout=30, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return requests.delete(self.api + path, headers=self.headers, timeout=30, **kwargs)

    def saved_in_workspace(self, prefix: str, text: str) -> None:
        """Wait until JupyterLab saved its layout (a moment after a change) with an entry whose key
        starts with `prefix` and whose value holds `text`: a reload before that restores no tab."""
        deadline = time.monotonic() + 30
        while True:
            data = self.page("lab/api/workspaces/default").json()["data"]
            if any(key.startswith(prefix) and text in json.dumps(value) for key, value in data.items()):
                return
            assert time.monotonic() < deadline, f"the workspace never held {prefix}…{text}: {data}"
            time.sleep(0.2)

    def wait_for(
        self,
        run_id: str,
        states: Collection[str] = ("Succeeded", "Failed", "Stopped", "Pruned"),
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            record: dict[str, Any] = self.get(f"experiments/{run_id}").json()
            if record["status"] in states:
                return record
            time.sleep(0.1)
        raise AssertionError(f"{run_id} did not reach {states}: {record}")


def run_in_kernel(server: JupyterServer, code: str, timeout: float = 60.0) -> str:
    """Start a kernel through the server's REST API, run `code`, return what it printed.

    The kernel is a real one launched by the server, so it carries the environment the
    server gives its kernels.
    """
    import asyncio
    import uuid

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    kernel = requests.post(server.url + "api/kernels", headers=server.headers, json={}, timeout=30).json()
    ws_url = server.url.replace("http", "ws", 1) + f"api/kernels/{kernel['id']}/channels"

    async def execute() -> str:
        request = HTTPRequest(ws_url, headers=server.headers)
        conn = await websocket_connect(request)
        msg_id = uuid.uuid4().hex
        conn.write_message(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "username": "test",
                        "session": uuid.uuid4().hex,
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": False,
                        "user_expressions": {},
                        "allow_stdin": False,
                    },
                }
            )
        )
        output = []
        while True:
            raw = await asyncio.wait_for(conn.read_message(), timeout)
            if raw is None:
                break
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "stream":
                output.append(msg["content"]["text"])
            elif kind == "error":
                output.append("\n".join(msg["content"]["traceback"]))
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                break
        conn.close()
        return "".join(output)

    try:
        return asyncio.run(execute())
    finally:
        requests.delete(server.url + f"api/kernels/{kernel['id']}", headers=server.headers, timeout=30)
