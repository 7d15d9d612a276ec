"""A local notebook server that starts and then dies before it is ready is named by its cause on
JupyterHub's spawn-pending page (the progress stream's `failed` event) and in the REST API,
not with JupyterHub's "Spawner failed to start [status=1]. The logs ... may contain details."

Real hubs with `LocalKubeLabSpawner`; `slow_spawn_timeout = 0` sends every spawn to the pending
page, as a slow machine does, so the sentence must arrive through the progress stream.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hub_process import Hub, local_hub_env
from hub_process import open_folder as open_folder_at
from system_users import needs_root, system_user
from world_python import world_python

PENDING = (
    "c.LocalKubeLabSpawner.start_timeout = 60\nc.JupyterHub.tornado_settings = {'slow_spawn_timeout': 0}\n"
)
# The user's own Jupyter config (their HOME is the workspace) names a class that cannot be imported:
# the real jupyterhub-singleuser exits with status 1 before it listens.
BROKEN_CONFIG = "c.ServerApp.kernel_manager_class = 'kubelab_no_such_module.Manager'\n"
GENERIC = "Spawner failed to start"


@pytest.fixture(scope="module")
def open_folder() -> Iterator[Path]:
    with open_folder_at("kubelab-server-crash-") as folder:
        yield folder


def local_hub(folder: Path, overrides: str = "", python: str = sys.executable, account: Any = None) -> Hub:
    return Hub(
        folder / "hub",
        PENDING + overrides,
        local_hub_env(folder),
        python=python,
        account=account,
    )


def failed_message(hub: Hub, user: str) -> str:
    """Start `user`'s server through the REST API and read the progress stream to its end."""
    hub.api("POST", "users", {"usernames": [user]})
    started = hub.api("POST", f"users/{user}/server", {})
    # 202 once the spawn is pending (201 when JupyterHub looked before it marked it so)
    assert started.status_code in (201, 202), (started.status_code, started.text, hub.log_tail())
    events = []
    with requests.get(
        f"{hub.url}/hub/api/users/{user}/server/progress",
        headers={"Authorization": f"token {hub.token}"},
        stream=True,
        timeout=120,
    ) as stream:
        for line in stream.iter_lines(decode_unicode=True):
            if line and line.startswith("data:"):
                events.append(json.loads(line[len("data:") :]))
    assert events and events[-1].get("failed"), (events, hub.log_tail())
    assert hub.api("GET", f"users/{user}").json()["servers"] == {}  # nothing was left running
    message: str = events[-1]["message"]
    assert GENERIC not in message, message
    return message


def test_a_bad_config_is_named_on_the_pending_page(open_folder: Path) -> None:
    me = os.environ.get("USER") or __import__("getpass").getuser()
    folder = open_folder / "own"
    config = folder / "root" / "workspaces" / me / ".jupyter"
    config.mkdir(parents=True)
    (config / "jupyter_server_config.py").write_text(BROKEN_CONFIG)
    with local_hub(folder, "c.LocalKubeLabSpawner.run_as_users = False\n") as hub:
        message = failed_message(hub, me)
    assert f"the notebook server for {me} stopped before it answered: it exited with status 1" in message
    assert "'kubelab_no_such_module.Manager' could not be imported" in message, message
    assert str(folder / "root" / "workspaces" / me / ".kubelab" / "server.log") in message, message


def test_a_crash_that_prints_the_token_is_named_without_it(open_folder: Path) -> None:
    me = os.environ.get("USER") or __import__("getpass").getuser()
    crash = (
        "import os; raise SystemExit('could not reach the hub with JUPYTERHUB_API_TOKEN='"
        " + os.environ['JUPYTERHUB_API_TOKEN'])"
    )
    overrides = (
        f"c.LocalKubeLabSpawner.cmd = [{sys.executable!r}, '-c', {crash!r}]\n"
        "c.LocalKubeLabSpawner.run_as_users = False\n"
    )
    with local_hub(open_folder / "token", overrides) as hub:
        message = failed_message(hub, me)
    assert "could not reach the hub with JUPYTERHUB_API_TOKEN=[redacted]" in message, message
    assert not re.search(r"[0-9a-f]{32}", message), message


@needs_root
def test_a_system_users_crash_is_named_from_a_log_they_own(open_folder: Path) -> None:
    """As root: the server runs as the user, writes its log as the user, and the hub reads it
    without following the links the user controls. The hub runs a Python every account can run."""
    python = world_python(open_folder / "python")
    with system_user() as account, local_hub(open_folder / "root-hub", python=str(python)) as hub:
        user = account.pw_name
        workspace = Path(hub.env["KUBELAB_HUB_ROOT"]) / "workspaces" / user
        (workspace / ".jupyter").mkdir(parents=True)
        (workspace / ".jupyter" / "jupyter_server_config.py").write_text(BROKEN_CONFIG)
        for path in (workspace, workspace / ".jupyter", workspace / ".jupyter" / "jupyter_server_config.py"):
            os.chown(path, account.pw_uid, account.pw_gid)
        message = failed_message(hub, user)
        assert "exited with status 1" in message and "could not be imported" in message, message
        log = workspace / ".kubelab" / "server.log"
        assert log.stat().st_uid == account.pw_uid and log.stat().st_mode & 0o777 == 0o600

        # A log the user swapped for a link to root's file is not read: root's lines never show.
        secret = Path(hub.env["KUBELAB_HUB_ROOT"]) / "root-only.txt"
        secret.write_text("Traceback (most recent call last):\nRootSecret: do not show\n")
        secret.chmod(0o600)
        log.unlink()
        log.symlink_to(secret)
        os.lchown(log, account.pw_uid, account.pw_gid)
        message = failed_message(hub, user)
        assert "exited with status 1" in message and "RootSecret" not in message, message
        assert secret.read_text().startswith("Traceback")  # and not truncated through the link


@needs_root
def test_a_hub_without_root_names_its_own_accounts_crash(open_folder: Path) -> None:
    """A hub run by an ordinary account (servers as that account, `only_own_user`) says the same."""
    python = world_python(open_folder / "python-own")
    with system_user() as account:
        folder = open_folder / "own-account"
        config = folder / "root" / "workspaces" / account.pw_name / ".jupyter"
        config.mkdir(parents=True)
        (config / "jupyter_server_config.py").write_text(BROKEN_CONFIG)
        for path in [folder, *folder.rglob("*")]:
            os.chown(path, account.pw_uid, account.pw_gid)
        with local_hub(folder, python=str(python), account=account) as hub:
            message = failed_message(hub, account.pw_name)
        assert f"the notebook server for {account.pw_name} stopped before it answered" in message, message
        assert "exited with status 1" in message and "could not be imported" in message, message
        assert (config.parent / ".kubelab" / "server.log").stat().st_uid == account.pw_uid
