"""Every local spawn failure reaches the hub's form (and its REST API) as a sentence naming the
cause, never a bare 500: tried through a real JupyterHub with `LocalKubeLabSpawner`.

The hub here is started with plain `jupyterhub` and the test virtualenv's Python, as a hub set
up without `kubelab hub` (and its start-up check) would be; the shared-password demo login lets
the test log in as any name.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hub_process import Hub, local_hub_env
from hub_process import open_folder as open_folder_at
from system_users import needs_root, system_user

from kubelab.errors import KubelabError
from kubelab.spawner.local import LocalKubeLabSpawner
from kubelab.spawner.preflight import closed_to_others

LOCAL = "c.LocalKubeLabSpawner.start_timeout = 60\n"


@pytest.fixture(scope="module")
def open_folder() -> Iterator[Path]:
    with open_folder_at("kubelab-spawn-failures-") as folder:
        yield folder


def local_hub(folder: Path, overrides: str = "") -> Hub:
    return Hub(
        folder / "hub",
        LOCAL + overrides,
        local_hub_env(folder),
    )


@pytest.fixture(scope="module")
def root_hub(open_folder: Path) -> Iterator[Hub]:
    if os.geteuid() != 0:
        pytest.skip("servers run as their users only when the hub runs as root")
    with local_hub(open_folder) as hub:
        yield hub


def refused_on_form_and_api(hub: Hub, user: str) -> tuple[str, str]:
    """The text of the form's answer and of the REST API's, both checked to be 400s."""
    form = hub.post_form(hub.login(user), user, {})
    assert form.status_code == 400, (form.status_code, form.text[-2000:], hub.log_tail())
    hub.api("POST", "users", {"usernames": [user]})
    api = hub.api("POST", f"users/{user}/server", {})
    assert api.status_code == 400, (api.status_code, api.text, hub.log_tail())
    assert hub.api("GET", f"users/{user}").json()["servers"] == {}  # nothing was left running
    return form.text, api.json()["message"]


@needs_root
def test_no_system_account_is_named(root_hub: Hub) -> None:
    name = "klnoacct" + secrets.token_hex(2)
    for text in refused_on_form_and_api(root_hub, name):
        assert f"there is no system account named &#39;{name}&#39;" in text or (
            f"there is no system account named '{name}'" in text
        ), text[-1500:]


@needs_root
def test_a_python_the_user_cannot_run_is_named_with_the_fix(root_hub: Hub) -> None:
    closed = closed_to_others(Path(sys.executable))
    if closed is None:
        pytest.skip("this machine's test Python is reachable by every user: nothing to refuse")
    with system_user() as account:
        for text in refused_on_form_and_api(root_hub, account.pw_name):
            assert f"runs as {account.pw_name}, who cannot run" in text, text[-1500:]
            assert f"chmod o+rx {closed}" in text and "/opt/kubelab" in text


@needs_root
def test_a_workspace_that_cannot_be_made_is_named(root_hub: Hub) -> None:
    with system_user() as account:
        workspaces = Path(root_hub.env["KUBELAB_HUB_ROOT"]) / "workspaces"
        workspaces.mkdir(parents=True, exist_ok=True)
        (workspaces / account.pw_name).write_text("a file where the workspace should be\n")
        for text in refused_on_form_and_api(root_hub, account.pw_name):
            assert f"{workspaces / account.pw_name} is a symbolic link or not a folder" in text, text[-1500:]


@needs_root
def test_a_hub_root_that_is_not_a_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    me = LocalKubeLabSpawner(
        user=SimpleNamespace(name="root"), root=str(tmp_path / "file" / "hub"), run_as_users=True
    )
    with pytest.raises(
        KubelabError, match=r"the hub could not create .*/file/hub/workspaces/root: Not a directory"
    ):
        me.prepare_folders()


def test_a_port_already_taken_is_named(open_folder: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        me = os.environ.get("USER") or __import__("getpass").getuser()
        overrides = f"c.LocalKubeLabSpawner.port = {port}\nc.LocalKubeLabSpawner.run_as_users = False\n"
        with local_hub(open_folder / "port", overrides) as hub:
            form_text, api_text = refused_on_form_and_api(hub, me)
            for text in (form_text, api_text):
                assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in text, text[-1500:]
            hub.api("DELETE", f"users/{me}/server")


def test_a_server_command_that_does_not_exist_is_named(open_folder: Path) -> None:
    me = os.environ.get("USER") or __import__("getpass").getuser()
    overrides = (
        "c.LocalKubeLabSpawner.cmd = ['/nonexistent/jupyterhub-singleuser']\n"
        "c.LocalKubeLabSpawner.run_as_users = False\n"
    )
    with local_hub(open_folder / "command", overrides) as hub:
        for text in refused_on_form_and_api(hub, me):
            assert (
                "command &#39;/nonexistent/jupyterhub-singleuser&#39; is not an executable program" in text
                or ("command '/nonexistent/jupyterhub-singleuser' is not an executable program" in text)
            ), text[-1500:]


CRASH = "import sys; print('starting', file=sys.stderr); print('no GPU driver here', file=sys.stderr); sys.exit(7)"


def test_a_server_that_exits_before_it_answers_is_named(open_folder: Path) -> None:
    me = os.environ.get("USER") or __import__("getpass").getuser()
    overrides = (
        f"c.LocalKubeLabSpawner.cmd = [{sys.executable!r}, '-c', {CRASH!r}]\n"
        "c.LocalKubeLabSpawner.run_as_users = False\n"
    )
    with local_hub(open_folder / "exits", overrides) as hub:
        for text in refused_on_form_and_api(hub, me):
            assert "stopped before it answered: it exited with status 7: no GPU driver here" in text, text[
                -1500:
            ]
