"""A hub that creates system accounts (`create_system_users`, as with NativeAuthenticator) maps
a hub name only to an account it created: a sign-up named after an existing account (another
person's, or `daemon`) gets a sentence, never a server running as that account."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hub_process import Hub, local_hub_env
from system_users import needs_root, system_user
from world_python import remove, world_python

from kubelab.spawner.accounts import RECORD, created_accounts


def server_uids(name: str) -> set[int]:
    """The uids of processes whose command line names the hub user's server."""
    uids = set()
    for proc in Path("/proc").iterdir():
        try:
            if f"/user/{name}/" in (proc / "environ").read_bytes().decode(errors="replace"):
                uids.add(proc.stat().st_uid)
        except OSError:
            continue
    return uids


@needs_root
def test_a_hub_name_never_runs_as_an_account_the_hub_did_not_create() -> None:
    folder = Path(tempfile.mkdtemp(prefix="kubelab-accounts-"))
    folder.chmod(0o755)
    python = world_python(folder / "python")
    fresh = "kltnew" + os.urandom(3).hex()
    env = local_hub_env(folder, KUBELAB_HUB_AUTH="shared-password")
    overrides = (
        "c.LocalKubeLabSpawner.create_system_users = True\nc.LocalKubeLabSpawner.start_timeout = 120\n"
    )
    try:
        with system_user("klv") as victim, Hub(folder / "hub", overrides, env, python=str(python)) as hub:
            for name in (victim.pw_name, "daemon"):
                assert hub.api("POST", "users", {"usernames": [name]}).status_code in (201, 409)
                reply = hub.api("POST", f"users/{name}/server", {})
                assert reply.status_code == 400, (name, reply.status_code, reply.text)
                assert f"a system account named '{name}' already exists" in reply.json()["message"]
                assert not server_uids(name)
                assert not (folder / "root" / "workspaces" / name).exists()
            # A new name gets a new account of its own, recorded; its next spawn is let in.
            hub.api("POST", "users", {"usernames": [fresh]})
            for _ in range(2):
                assert hub.api("POST", f"users/{fresh}/server", {}).status_code in (201, 202)
                hub.wait_server(fresh, timeout=120)
                made = pwd.getpwnam(fresh)
                assert server_uids(fresh) == {made.pw_uid}
                assert hub.api("DELETE", f"users/{fresh}/server").status_code in (202, 204)
                hub.wait_server(fresh, ready=False, timeout=60)
            record = folder / "root" / RECORD
            assert created_accounts(record.parent) == {fresh: made.pw_uid}
            assert record.stat().st_uid == 0 and record.stat().st_mode & 0o777 == 0o600
    finally:
        subprocess.run(["userdel", "--force", "--remove", fresh], capture_output=True)
        remove(python)
        shutil.rmtree(folder, ignore_errors=True)


@needs_root
def test_a_planted_or_edited_account_record_is_refused(tmp_path: Path) -> None:
    from kubelab.errors import KubelabError
    from kubelab.spawner.accounts import hub_account

    with system_user("klv") as victim:
        (tmp_path / RECORD).write_text(json.dumps({"accounts": {victim.pw_name: victim.pw_uid}}))
        (tmp_path / RECORD).chmod(0o666)  # anyone could have written it: not trusted
        with pytest.raises(KubelabError, match="not a file only the hub's account may write"):
            hub_account(victim.pw_name, tmp_path)
        (tmp_path / RECORD).chmod(0o600)
        os.chown(tmp_path / RECORD, victim.pw_uid, victim.pw_gid)  # the user's own file
        with pytest.raises(KubelabError, match="not a file only the hub's account may write"):
            hub_account(victim.pw_name, tmp_path)
