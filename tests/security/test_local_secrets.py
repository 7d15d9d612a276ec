"""A user's secrets on a shared machine, attacked by another real system account.

TensorBoard: the capability in its pages' URL is nowhere another account can read (`ps`,
`/proc/*/cmdline`, `/proc/*/environ`, TensorBoard's `/tmp/.tensorboard-info`), and its loopback
port answers nobody but the Jupyter server's proxy, even to a caller who knows the whole path.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_server_process import JupyterServer
from system_users import as_user, needs_root, system_user

OTHER_PYTHON = "/usr/bin/python3"  # the attacker's own: the test virtualenv may be closed to it
REPORT = "import kubelab\nfor s in range(3):\n    kubelab.report(step=s, secret_loss=1.0 / (s + 1))\n"

# Run as the other account: everything it can read of every process and of TensorBoard's records.
SNOOP = textwrap.dedent(
    """
    import glob, json, sys
    seen = []
    for pattern in ("/proc/*/cmdline", "/proc/*/environ", "/tmp/.tensorboard-info/*"):
        for path in glob.glob(pattern):
            try:
                with open(path, "rb") as f:
                    seen.append(f.read().decode(errors="replace"))
            except OSError:
                pass
    print(json.dumps(seen))
    """
)

# Run as the other account: TensorBoard's port, asked directly with the right path.
ASK = textwrap.dedent(
    """
    import sys, urllib.error, urllib.request
    url = sys.argv[1]
    try:
        with urllib.request.urlopen(url, timeout=20) as reply:
            print(reply.status, reply.read().decode(errors="replace"))
    except urllib.error.HTTPError as exc:
        print(exc.code, exc.read().decode(errors="replace"))
    """
)


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its socket inodes in /proc/net/tcp, state 0A)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, dict, str]]:
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
def test_another_account_cannot_read_the_tensorboard_capability(tensorboard) -> None:
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
def test_another_account_gets_nothing_from_the_tensorboard_port(tensorboard) -> None:
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
