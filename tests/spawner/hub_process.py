"""A real JupyterHub (with its configurable-http-proxy) as a subprocess on free ports.

It loads `hub_config/jupyterhub_config.py` through a small test config that adds an admin
service token and whatever the test overrides, so the shipped configuration is what runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from controlplane.cluster import ControlPlane

REPO = Path(__file__).resolve().parents[2]
HUB_CONFIG = REPO / "hub_config" / "jupyterhub_config.py"
PASSWORD = "lab-password-123"


@contextlib.contextmanager
def open_folder(prefix: str) -> Iterator[Path]:
    """A folder every account may pass through to its workspace (pytest's own are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def local_hub_env(folder: Path, **extra: str) -> dict[str, str]:
    """A local hub's environment with its workspaces (`root/`) and GPU ledger (`machine/`)
    under `folder`, and one fake T4; `extra` adds or overrides variables."""
    return {
        "KUBELAB_HUB_MODE": "local",
        "KUBELAB_HUB_ROOT": str(folder / "root"),
        "KUBELAB_MACHINE_DIR": str(folder / "machine"),
        "KUBELAB_FAKE_GPUS": "Tesla T4",
        **extra,
    }


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def need_proxy() -> None:
    if not shutil.which("configurable-http-proxy"):
        pytest.skip("configurable-http-proxy is not installed (npm install -g configurable-http-proxy)")


class Hub:
    """`with Hub(tmp, overrides, env) as hub: hub.api("GET", "users")`."""

    def __init__(
        self,
        directory: Path,
        overrides: str = "",
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        kubelab_hub: bool = False,
        account: Any = None,
    ) -> None:
        """`kubelab_hub`: start it as an admin would, `python -m kubelab.cli hub` (with its checks).
        `account` (a `pwd` entry): run the hub as that system account instead of ours (root only)."""
        self.dir = Path(directory)
        self.python, self.kubelab_hub, self.account = python, kubelab_hub, account
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port, self.hub_port, self.proxy_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(16)
        self.log = self.dir / "hub.log"
        self.config = self.dir / "test_jupyterhub_config.py"
        self.config.write_text(
            "c = get_config()  # noqa\n"
            f"load_subconfig({str(HUB_CONFIG)!r})  # noqa\n"
            "c.JupyterHub.services.append({'name': 'test-admin', 'api_token': %r})\n"
            "c.JupyterHub.load_roles.append({'name': 'test-admin', 'scopes': ['admin:users', "
            "'admin:servers', 'admin:groups', 'tokens', 'admin-ui', 'access:servers', 'read:users'],"
            " 'services': ['test-admin']})\n"
            % self.token
            + f"c.JupyterHub.hub_port = {self.hub_port}\n"
            + f"c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:{self.proxy_port}'\n"
            + overrides
        )
        self.env = {
            **os.environ,
            "KUBELAB_HUB_AUTH": "shared-password",
            "KUBELAB_HUB_PASSWORD": PASSWORD,
            **(env or {}),
        }
        if account is not None:
            self.env.update({"HOME": account.pw_dir, "USER": account.pw_name, "LOGNAME": account.pw_name})
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Hub:
        need_proxy()
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.account is not None:  # its database, cookie secret and proxy pid go here
            os.chown(self.dir, self.account.pw_uid, self.account.pw_gid)
        if self.kubelab_hub:  # the root folder holds the database, cookie secret and proxy pid
            command = [
                self.python,
                "-m",
                "kubelab.cli",
                "hub",
                "--port",
                str(self.port),
                "--config",
                str(self.config),
                "--root",
                self.env.get("KUBELAB_HUB_ROOT", str(self.dir / "root")),
            ]
            return self._wait(command)
        command = [
            self.python,
            "-m",
            "jupyterhub",
            "-f",
            str(self.config),
            "--ip=127.0.0.1",
            f"--port={self.port}",
            f"--JupyterHub.hub_port={self.hub_port}",
            f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{self.proxy_port}",
            f"--JupyterHub.db_url=sqlite:///{self.dir / 'hub.sqlite'}",
            f"--JupyterHub.cookie_secret_file={self.dir / 'cookie_secret'}",
            f"--ConfigurableHTTPProxy.pid_file={self.dir / 'proxy.pid'}",
        ]
        return self._wait(command)

    def _wait(self, command: list[str]) -> Hub:
        as_account: dict[str, Any] = {}
        if self.account is not None:
            as_account = {"user": self.account.pw_uid, "group": self.account.pw_gid, "extra_groups": []}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                command, env=self.env, cwd=self.dir, stdout=out, stderr=subprocess.STDOUT, **as_account
            )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"jupyterhub exited early:\n{self.log_tail()}")
            try:
                if requests.get(self.url + "/hub/api/", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"jupyterhub did not answer in time:\n{self.log_tail()}")

    def log_tail(self, chars: int = 5000) -> str:
        """The end of the hub's log without the polling noise of tests and services."""
        if not self.log.exists():
            return ""
        lines = [
            line
            for line in self.log.read_text(errors="replace").splitlines()
            if " 200 GET /hub/api/users" not in line and "ConfigProxy" not in line
        ]
        return "\n".join(lines)[-chars:]

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()  # the hub stops its proxy and services (and local servers)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> Hub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- clients --------------------------------------------------------------------------

    def api(self, method: str, path: str, body: Any = None, **kwargs: Any) -> requests.Response:
        return requests.request(
            method,
            f"{self.url}/hub/api/{path}",
            json=body,
            timeout=60,
            headers={"Authorization": f"token {self.token}"},
            **kwargs,
        )

    def login(self, user: str, password: str = PASSWORD) -> requests.Session:
        """A browser-like session logged in (with the shared password unless given)."""
        session = requests.Session()
        page = session.get(f"{self.url}/hub/login", timeout=30)
        xsrf = _xsrf(page.text) or session.cookies.get("_xsrf", "")
        reply = session.post(
            f"{self.url}/hub/login", data={"username": user, "password": password, "_xsrf": xsrf}, timeout=30
        )
        assert reply.status_code == 200 and "/hub/login" not in reply.url, self.log_tail()
        return session

    def post_form(
        self, session: requests.Session, user: str, data: dict[str, str], server: str = ""
    ) -> requests.Response:
        page = session.get(f"{self.url}/hub/spawn/{user}/{server}".rstrip("/"), timeout=30)
        xsrf = _xsrf(page.text) or session.cookies.get("_xsrf", "")
        return session.post(
            f"{self.url}/hub/spawn/{user}/{server}".rstrip("/"),
            data={**data, "_xsrf": xsrf},
            timeout=60,
            allow_redirects=False,
        )

    def spawn_page(self, session: requests.Session, user: str, server: str = "") -> str:
        """The spawn form as the user's browser gets it (the hub's live GPU counts in it)."""
        return session.get(f"{self.url}/hub/spawn/{user}/{server}".rstrip("/"), timeout=30).text

    def spawn_accepted(
        self, session: requests.Session, user: str, data: dict[str, str], server: str = ""
    ) -> None:
        """Submit the spawn form; the hub accepts it (redirects to the server's progress)."""
        reply = self.post_form(session, user, data, server=server)
        assert reply.status_code == 302, reply.text[-2000:]

    def spawn_refused(
        self, session: requests.Session, user: str, data: dict[str, str], *sentences: str, server: str = ""
    ) -> str:
        """Submit the spawn form; the hub refuses it, showing each of `sentences`: the page."""
        reply = self.post_form(session, user, data, server=server)
        assert reply.status_code == 400, reply.text[-2000:]
        for sentence in sentences:
            assert sentence in reply.text, reply.text[-3000:]
        return reply.text

    def wait_server(
        self, user: str, ready: bool = True, server: str = "", timeout: float = 60
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        model: dict[str, Any] = {}
        while time.monotonic() < deadline:
            model = self.api("GET", f"users/{user}").json()
            state = (model.get("servers") or {}).get(server)
            if (state is not None and state.get("ready")) == ready and (ready or not state):
                return model
            time.sleep(0.2)
        raise AssertionError(f"{user}/{server} not ready={ready}: {model}\n{self.log_tail()}")


def hub_token(kube: ControlPlane) -> str:
    """The hub runs with the shipped ClusterRole (hub_config/rbac/hub-clusterrole.yaml), not as admin:
    the API server's RBAC and escalation checks prove it is enough, Role grants included."""
    kube.request("POST", "/api/v1/namespaces", {"metadata": {"name": "jhub"}})
    kube.request("POST", "/api/v1/namespaces/jhub/serviceaccounts", {"metadata": {"name": "hub"}})
    for document in yaml.safe_load_all((REPO / "hub_config" / "rbac" / "hub-clusterrole.yaml").read_text()):
        plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[
            document["kind"]
        ]
        kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/{plural}", document)
    return kube.token_for("jhub", "hub")


@contextlib.contextmanager
def cluster_hub(
    kube: ControlPlane, directory: Path, stand_in_port: int, groups: dict[str, Any], overrides: str = ""
) -> Iterator[Hub]:
    """A hub in Kubernetes mode on `kube` with the shipped ClusterRole's token, `groups` loaded;
    its notebook pods run on 127.0.0.1, where the stand-in on `stand_in_port` answers for them.
    `overrides` adds configuration lines."""
    kubeconfig = kube.write_kubeconfig(directory / "kubeconfig", token=hub_token(kube))
    config = (
        f"c.KubeLabSpawner.port = {stand_in_port}\n"
        "c.KubeLabSpawner.start_timeout = 60\n"
        # a loopback API server has no `kubernetes` endpoints to discover (see tests/controlplane)
        "c.KubeLabSpawner.api_server_cidrs = ['127.0.0.1/32']\n"
        f"c.KubeLabSpawner.api_server_ports = [{kube.port}]\n"
        f"c.JupyterHub.load_groups = {groups!r}\n"
    )
    env = {"KUBELAB_HUB_MODE": "kubernetes", "KUBECONFIG": str(kubeconfig)}
    with Hub(directory, config + overrides, env) as hub:
        yield hub


def listed(kube: ControlPlane, path: str) -> list[dict[str, Any]]:
    """The items of a list the API server answers at `path`."""
    items: list[dict[str, Any]] = kube.request("GET", path)["items"]
    return items


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def hub_samples(hub: Hub, until: Callable[[Samples], bool], timeout: float = 60.0) -> Samples:
    """kubelab's samples on the hub's `/hub/metrics`, `(name, sorted labels) -> value`, scraped
    every half second until `until` holds of them; after `timeout`, the last scrape, for the
    test's assertion to show."""
    deadline = time.monotonic() + timeout
    while True:
        text = requests.get(f"{hub.url}/hub/metrics", timeout=30).text
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name.startswith("jupyterhub_kubelab_")
        }
        if until(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.5)


def _xsrf(html: str) -> str:
    match = re.search(r'name="_xsrf" value="([^"]+)"', html)
    return match.group(1) if match else ""
