"""The local hub runs as root: nothing it does on disk may follow a path a user controls.

Each test creates a real system user and tries the attack that user could try.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubelab.spawner.local import LocalKubeLabSpawner
from system_users import needs_root, system_user

from kubelab.errors import KubelabError

pytestmark = needs_root


def spawner_for(name: str, root: Path) -> LocalKubeLabSpawner:
    return LocalKubeLabSpawner(user=SimpleNamespace(name=name), root=str(root), run_as_users=True)


def test_workspaces_are_private_to_their_user(tmp_path: Path) -> None:
    with system_user() as alice:
        spawner = spawner_for(alice.pw_name, tmp_path / "hub")
        spawner.prepare_folders()
        for folder in (spawner.workspace, spawner.workspace / ".kubelab", spawner.archive):
            info = folder.lstat()
            assert (info.st_uid, info.st_gid) == (alice.pw_uid, alice.pw_gid), folder
            assert stat.S_IMODE(info.st_mode) == 0o700, (folder, oct(info.st_mode))


def test_a_symlinked_kubelab_folder_does_not_give_the_user_roots_files(tmp_path: Path) -> None:
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    (secret / "shadow").write_text("root's")
    with system_user() as mallory:
        spawner = spawner_for(mallory.pw_name, tmp_path / "hub")
        spawner.prepare_folders()
        inside = spawner.workspace / ".kubelab"
        inside.rmdir()  # mallory owns the workspace: she can swap the folder for a link
        os.symlink(secret, inside)
        os.lchown(inside, mallory.pw_uid, mallory.pw_gid)
        with pytest.raises(KubelabError, match=r"\.kubelab.*(link|folder)"):
            spawner.prepare_folders()
        assert secret.stat().st_uid == 0 and stat.S_IMODE(secret.stat().st_mode) == 0o700
        assert inside.is_symlink()  # refused and left as it was


def test_a_symlinked_workspace_file_is_not_followed_either(tmp_path: Path) -> None:
    target = tmp_path / "etc-file"
    target.write_text("root's")
    with system_user() as mallory:
        spawner = spawner_for(mallory.pw_name, tmp_path / "hub")
        spawner.prepare_folders()
        inside = spawner.workspace / ".kubelab"
        inside.rmdir()
        os.symlink(target, inside)
        with pytest.raises(KubelabError):
            spawner.prepare_folders()
        assert target.stat().st_uid == 0
