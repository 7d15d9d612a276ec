"""The Jupyter server the notebook tests run against: the shared helper, with a working flag.

`tests/jupyter_server_process.py` passes `jpserver_extensions` as JSON, which traitlets 5.16
refuses ("expected a dict, not the list"); `name=True` is the form it accepts. Only the
command differs, so this subclass rebuilds it and keeps everything else.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for the shared helpers

from jupyter_server_process import JupyterServer, free_port


class PortTaken(RuntimeError):
    pass


class KubelabServer(JupyterServer):
    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
            f"--port={self.port}", "--ip=127.0.0.1", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.jpserver_extensions=kubelab.server_extension=True",
            "--ServerApp.port_retries=0", *self.extra,
        ]

    def start(self, attempts: int = 3) -> KubelabServer:
        """Start on a free port; another port when the chosen one was taken meanwhile."""
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

    def _start(self) -> KubelabServer:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(self.command(), env=self.env, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + 60
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

    def page(self, path: str, token: bool = True, **kwargs) -> requests.Response:
        """A browser-side path (not under /kubelab/api), with or without the token."""
        headers = self.headers if token else {}
        return requests.get(self.url + path.lstrip("/"), headers=headers, timeout=60,
                            allow_redirects=False, **kwargs)
