"""A user's secrets on a shared machine, attacked by another real system account.

The local hub as root: a server that died leaves its port to nobody but root (the hub binds a
port below 1024 for each server and hands it the socket), so another account cannot take the
port and receive the requests the proxy still routes there, with the user's hub token.

TensorBoard: the capability in its pages' URL is nowhere another account can read (`ps`,
`/proc/*/cmdline`, `/proc/*/environ`, TensorBoard's `/tmp/.tensorboard-info`), and its loopback
port answers nobody but the Jupyter server's proxy, even to a caller who knows the whole path.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer
from other_account import ASK, OTHER_PYTHON, SNOOP, listening_ports
from system_users import as_user, needs_root, system_user
from world_python import remove, world_python

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spawner"))
from hub_process import Hub, local_hub_env

REPORT = "import kubelab\nfor s in range(3):\n    kubelab.report(step=s, secret_loss=1.0 / (s + 1))\n"


@pytest.fixture(scope="module")
def tensorboard(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[JupyterServer, dict[str, Any], str]]:
    folder = tmp_path_factory.mktemp("tb-secrets")
    with JupyterServer(folder / "root", folder / "home") as server:
        run = server.post("experiments", {"name": "private", "command": [sys.executable, "-c", REPORT]})
        assert run.status_code == 201, run.text
        assert server.wait_for(run.json()["id"], timeout=120)["status"] == "Succeeded"
        session = server.post("tensorboards", {"experiments": [run.json()["id"]]}).json()
        entry = server.page(session["url"])  # the redirect to the capability URL
        assert entry.status_code == 302, entry.text
        view = entry.headers["Location"].rstrip("/")
        tags = server.page(view + "/data/plugin/scalars/tags", allow_redirects=True)
        assert tags.status_code == 200 and "secret_loss" in tags.text  # the proxy is served
        yield server, session, view


@needs_root
def test_another_account_cannot_read_the_tensorboard_capability(
    tensorboard: tuple[JupyterServer, dict[str, Any], str],
) -> None:
    _, _, view = tensorboard
    capability = view.rsplit("/", 1)[1]
    with system_user("kltb") as other:
        done = as_user(other, [OTHER_PYTHON, "-c", SNOOP])
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
    assert any("kubelab.tensorboard.supervisor" in text for text in seen)  # it did see the process
    leaks = [text[:200] for text in seen if capability in text]
    assert not leaks, leaks


@needs_root
def test_another_account_gets_nothing_from_the_tensorboard_port(
    tensorboard: tuple[JupyterServer, dict[str, Any], str],
) -> None:
    server, session, view = tensorboard
    ports = listening_ports(session["pid"])
    assert ports, "TensorBoard listens on no port"
    with system_user("kltb") as other:
        for port in ports:
            done = as_user(
                other, [OTHER_PYTHON, "-c", ASK, f"http://127.0.0.1:{port}{view}/data/plugin/scalars/tags"]
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("403") and "secret_loss" not in done.stdout, done.stdout[:300]
    still = server.page(view + "/data/plugin/scalars/tags", allow_redirects=True)
    assert still.status_code == 200 and "secret_loss" in still.text  # the proxy's requests still pass


# -- the local hub as root: a dead server's port, taken by another account -----------------------

# Run as the other account: bind the port, then print whatever arrives there for a while.
SQUAT = textwrap.dedent(
    """
    import socket, sys, time
    port = int(sys.argv[1])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        print("refused", exc.errno, flush=True)
        sys.exit(0)
    sock.listen(8)
    print("bound", flush=True)
    sock.settimeout(30)
    try:
        conn, _ = sock.accept()
        conn.settimeout(5)
        print(conn.recv(65536).decode(errors="replace"), flush=True)
    except OSError:
        pass
    """
)


def as_user_in_background(entry: Any, argv: list[str]) -> subprocess.Popen[str]:
    def drop() -> None:
        os.setgid(entry.pw_gid)
        os.initgroups(entry.pw_name, entry.pw_gid)
        os.setuid(entry.pw_uid)

    return subprocess.Popen(
        argv, preexec_fn=drop, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={}
    )


@needs_root
def test_a_dead_servers_port_cannot_be_squatted_for_its_users_token() -> None:
    folder = Path(tempfile.mkdtemp(prefix="kubelab-squat-"))
    folder.chmod(0o755)
    python = world_python(folder / "python")
    env = local_hub_env(folder, KUBELAB_HUB_AUTH="pam")
    try:
        with (
            system_user("klvic") as victim,
            system_user("klsq") as squatter,
            Hub(
                folder / "hub", "c.LocalKubeLabSpawner.start_timeout = 120\n", env, python=str(python)
            ) as hub,
        ):
            name = victim.pw_name
            hub.api("POST", "users", {"usernames": [name]})
            token = hub.api("POST", f"users/{name}/tokens", {"note": "squat"}).json()["token"]
            assert hub.api("POST", f"users/{name}/server", {}).status_code in (201, 202)
            hub.wait_server(name, timeout=120)
            through_proxy = f"{hub.url}/user/{name}/api/status"
            auth = {"Authorization": f"token {token}"}
            assert requests.get(through_proxy, headers=auth, timeout=30).status_code == 200
            pid = hub.api("GET", f"users/{name}", params={"include_stopped_servers": "1"}).json()
            pid = pid["servers"][""]["state"]["pid"]
            (port,) = listening_ports(pid)
            os.killpg(pid, signal.SIGKILL)  # the server dies; the proxy's route lives on a while
            squat = as_user_in_background(squatter, [OTHER_PYTHON, "-c", SQUAT, str(port)])
            try:
                assert squat.stdout is not None
                first = squat.stdout.readline().strip()
                if first == "bound":
                    with contextlib.suppress(requests.RequestException):
                        requests.get(through_proxy, headers=auth, timeout=10)
                seen = first + (squat.communicate(timeout=60)[0] or "")
            finally:
                if squat.poll() is None:
                    squat.kill()
            assert token not in seen, seen[:500]
            assert first.startswith("refused"), seen[:500]
    finally:
        remove(python)
        shutil.rmtree(folder, ignore_errors=True)
