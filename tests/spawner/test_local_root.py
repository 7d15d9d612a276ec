"""The local hub runs as root: nothing it does on disk may follow a path a user controls.

Each test creates a real system user and tries the attack that user could try.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
from system_users import needs_root, system_user

from kubelab.errors import KubelabError
from kubelab.spawner.local import LocalKubeLabSpawner

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


def test_one_user_cannot_read_or_write_anothers_workspace_or_archive() -> None:
    import shutil
    import tempfile

    from system_users import as_user

    base = Path(tempfile.mkdtemp(prefix="kubelab-tenancy-"))  # pytest's own folders are 0700
    base.chmod(0o755)
    hub = base / "hub"
    with system_user() as alice, system_user() as bob:
        theirs = spawner_for(bob.pw_name, hub)
        spawner_for(alice.pw_name, hub).prepare_folders()
        theirs.prepare_folders()
        notes = theirs.workspace / "notes.ipynb"
        notes.write_text("bob's")
        os.chown(notes, bob.pw_uid, bob.pw_gid)
        for argv in (
            ["cat", str(notes)],
            ["ls", str(theirs.workspace)],
            ["ls", str(theirs.archive)],
            ["touch", str(theirs.workspace / "planted")],
            ["touch", str(theirs.archive / "planted")],
        ):
            attempt = as_user(alice, argv)
            assert attempt.returncode != 0 and "Permission denied" in attempt.stderr, argv
        assert as_user(bob, ["cat", str(notes)]).stdout == "bob's"
        assert as_user(bob, ["touch", str(theirs.workspace / "mine")]).returncode == 0
        listing = as_user(alice, ["ls", str(hub / "workspaces")])
        assert listing.returncode != 0  # nor which users there are
    shutil.rmtree(base)


def test_servers_of_every_user_share_one_ledger_through_a_group(monkeypatch: pytest.MonkeyPatch) -> None:
    import grp
    import shutil
    import subprocess
    import tempfile

    from system_users import as_user

    from kubelab.backends.local.gpus import Gpu, GpuAllocator

    base = Path(tempfile.mkdtemp(prefix="kubelab-ledger-group-"))
    base.chmod(0o755)
    machine = base / "machine"
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(machine))
    group = "klg" + os.urandom(3).hex()
    try:
        with system_user() as alice, system_user() as bob:
            spawner = spawner_for(alice.pw_name, base / "hub")
            spawner.ledger_group = group
            spawner.prepare_folders()
            preexec = spawner.make_preexec_fn(alice.pw_name)
            gid = grp.getgrnam(group).gr_gid
            info = machine.stat()
            assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, gid, 0o3770)
            assert GpuAllocator([Gpu(0, "T4")], machine).try_acquire("root-run", os.getpid(), 1) == [0]
            ledger = machine / "gpus.json"
            seen = subprocess.run(
                ["sh", "-c", f"id -G; test -w {ledger} && echo writable"],
                preexec_fn=preexec,
                capture_output=True,
                text=True,
            )
            assert str(gid) in seen.stdout.split() and "writable" in seen.stdout, seen
            outsider = as_user(bob, ["sh", "-c", f"test -w {ledger} || test -r {ledger} || echo refused"])
            assert "refused" in outsider.stdout  # not in the group: neither reads nor writes it
    finally:
        subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
