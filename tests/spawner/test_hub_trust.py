"""The hub's own boundaries: who can log in as whom, and what a hub without root may start."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from system_users import needs_root, system_user
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from kubelab.errors import KubelabError, ValidationError
from kubelab.spawner.local import LocalKubeLabSpawner
from kubelab.spawner.preflight import check_runnable_by_users, closed_to_others

CONFIG = Path(__file__).resolve().parents[2] / "hub_config" / "jupyterhub_config.py"


def hub_config(monkeypatch: pytest.MonkeyPatch, **env: str) -> Config:
    for name in ("KUBELAB_HUB_AUTH", "KUBELAB_HUB_MODE", "KUBELAB_HUB_GROUP"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return PyFileConfigLoader(CONFIG.name, str(CONFIG.parent)).load_config()


def test_the_shipped_hubs_do_not_let_anyone_log_in_as_anyone(monkeypatch: pytest.MonkeyPatch) -> None:
    local = hub_config(monkeypatch, KUBELAB_HUB_MODE="local")
    assert local.JupyterHub.authenticator_class == "pam"
    cluster = hub_config(monkeypatch, KUBELAB_HUB_MODE="kubernetes")
    assert cluster.JupyterHub.authenticator_class == "generic-oauth"
    assert cluster.Authenticator.allow_all is False  # an OAuth hub names who may log in
    native = hub_config(monkeypatch, KUBELAB_HUB_AUTH="native")
    assert native.NativeAuthenticator.open_signup is False and native.LocalKubeLabSpawner.create_system_users
    lab = hub_config(monkeypatch, KUBELAB_HUB_GROUP="lab")
    assert lab.PAMAuthenticator.allowed_groups == {"lab"}


def test_the_shared_password_is_an_opt_in_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    demo = hub_config(monkeypatch, KUBELAB_HUB_AUTH="shared-password", KUBELAB_HUB_PASSWORD="a-lab-password")
    assert demo.JupyterHub.authenticator_class == "shared-password"
    with pytest.raises(ValueError, match="KUBELAB_HUB_AUTH must be"):
        hub_config(monkeypatch, KUBELAB_HUB_AUTH="nobody-checks")


def test_a_python_other_users_cannot_reach_is_named_with_the_fix() -> None:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="kubelab-preflight-"))  # pytest's own folders are 0700
    try:
        check_python_reach(base)
    finally:
        shutil.rmtree(base)


def check_python_reach(tmp_path: Path) -> None:
    home = tmp_path / "root-home"
    (home / "venv" / "bin").mkdir(parents=True)
    python = home / "venv" / "bin" / "python"
    python.write_text("")
    python.chmod(0o755)
    home.chmod(0o700)  # like /root: the virtualenv's Python is out of every other user's reach
    tmp_path.chmod(0o755)
    for parent in tmp_path.parents:
        if closed_to_others(parent) is not None:
            pytest.skip(f"{parent} is closed to others on this machine")
    assert closed_to_others(python) == home
    with pytest.raises(ValidationError) as refused:
        check_runnable_by_users([python])
    reason = refused.value.fields[0].reason
    assert str(home) in reason and "chmod o+rx" in reason and "/opt/kubelab" in reason
    home.chmod(0o755)
    check_runnable_by_users([python])


def spawner(name: str, **traits: Any) -> LocalKubeLabSpawner:
    return LocalKubeLabSpawner(user=SimpleNamespace(name=name), **traits)


def test_a_hub_without_root_starts_only_its_own_users_server() -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    spawner(me, only_own_user=True).check_user()
    with pytest.raises(KubelabError, match=f"runs as {me} without root, so it starts a server only for {me}"):
        spawner("alice", only_own_user=True).check_user()


@needs_root
def test_a_missing_account_is_a_sentence_or_is_created_when_configured(tmp_path: Path) -> None:
    name = "kltnew" + os.urandom(2).hex()
    try:
        with pytest.raises(KubelabError, match=f"no system account named '{name}'"):
            spawner(name, root=str(tmp_path), run_as_users=True).prepare_folders()
        made = spawner(name, root=str(tmp_path), run_as_users=True, create_system_users=True)
        made.prepare_folders()
        assert made.workspace.stat().st_uid == pwd.getpwnam(name).pw_uid
        with pytest.raises(KubelabError, match="cannot be a system account name"):
            spawner(
                "Root;rm", root=str(tmp_path), run_as_users=True, create_system_users=True
            ).prepare_folders()
    finally:
        subprocess.run(["userdel", "--force", "--remove", name], capture_output=True)


@needs_root
def test_system_user_helper_cleans_up() -> None:
    with system_user() as entry:
        name = entry.pw_name
    with pytest.raises(KeyError):
        pwd.getpwnam(name)


@needs_root
def test_kubelab_hub_as_root_says_what_to_fix_when_users_cannot_run_its_python(tmp_path: Path) -> None:
    import sys

    closed = closed_to_others(Path(sys.executable))
    if closed is None:
        pytest.skip("this machine's Python is reachable by every user: nothing to refuse")
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "hub", "--port", "1", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBELAB_HUB_AUTH": "pam", "KUBELAB_HUB_RUN_AS_USERS": ""},
    )
    assert done.returncode != 0
    assert f"chmod o+rx {closed}" in done.stderr and "other users cannot reach it" in done.stderr, done.stderr
