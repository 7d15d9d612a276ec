"""The machine-wide GPU ledger: never world-writable, never written through a link.

Another account on the machine must not be able to plant a symlink for a root process to
write through, nor rewrite the ledger; tests run as root and try it with a real second user.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from system_users import as_user, needs_root, system_user

from kubelab.backends.local.gpus import Gpu, GpuAllocator, machine_dir
from kubelab.errors import KubelabError

GPUS = [Gpu(0, "T4"), Gpu(1, "T4")]


def test_a_new_machine_dir_is_private_and_its_files_are_not_world_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    directory = machine_dir()
    assert stat.S_IMODE(directory.stat().st_mode) & 0o002 == 0
    allocator = GpuAllocator(GPUS, directory)
    assert allocator.try_acquire("run-a", os.getpid(), 1) == [0]
    for path in directory.iterdir():
        assert stat.S_IMODE(path.lstat().st_mode) & 0o002 == 0, (path, oct(path.lstat().st_mode))


def test_a_world_writable_machine_dir_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "kubelab-machine"
    shared.mkdir()
    shared.chmod(0o1777)  # what /tmp/kubelab-machine used to be: anyone could rewrite the ledger
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(shared))
    with pytest.raises(KubelabError, match="kubelab-machine.*writable by every user"):
        machine_dir()


@needs_root
def test_a_machine_dir_owned_by_another_user_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with system_user() as mallory:
        planted = tmp_path / "planted"
        planted.mkdir(mode=0o755)
        os.chown(planted, mallory.pw_uid, mallory.pw_gid)
        monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(planted))
        with pytest.raises(KubelabError, match=f"belongs to {mallory.pw_name}"):
            machine_dir()


def test_a_symlinked_machine_dir_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    os.symlink(real, tmp_path / "link")
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "link"))
    with pytest.raises(KubelabError, match="symbolic link"):
        machine_dir()


@needs_root
def test_planted_links_for_the_temporary_file_and_the_lock_are_not_followed(tmp_path: Path) -> None:
    """The old code wrote `.gpus.<pid>.tmp` by name and chmod-ed it 0666: a link there made a
    root process rewrite any file and leave it world-writable."""
    directory = tmp_path / "machine"
    directory.mkdir(mode=0o755)
    victim = tmp_path / "victim"
    victim.write_text("root's\n")
    victim.chmod(0o600)
    os.symlink(victim, directory / f".gpus.{os.getpid()}.tmp")
    allocator = GpuAllocator(GPUS, directory)
    assert allocator.try_acquire("run-a", os.getpid(), 1) == [0]
    assert victim.read_text() == "root's\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert json.loads((directory / "gpus.json").read_text())["allocations"]["0"]["run"] == "run-a"

    (directory / "gpus.lock").unlink()
    os.symlink(victim, directory / "gpus.lock")
    with pytest.raises(KubelabError, match="gpus.lock"):
        allocator.snapshot()
    assert victim.read_text() == "root's\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A folder every account can pass through (pytest's own are root's 0700)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="kubelab-ledger-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_root
def test_another_user_cannot_rewrite_the_ledger(reachable: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(reachable / "machine"))
    allocator = GpuAllocator(GPUS, machine_dir())
    assert allocator.try_acquire("root-run", os.getpid(), 2) == [0, 1]
    with system_user() as mallory:
        ledger = allocator.ledger
        attack = as_user(mallory, ["sh", "-c", f'echo \'{{"allocations": {{}}, "queue": []}}\' > {ledger}'])
        assert attack.returncode != 0
        replace = as_user(
            mallory, ["sh", "-c", f"echo x > {ledger.parent}/new && mv {ledger.parent}/new {ledger}"]
        )
        assert replace.returncode != 0
    assert sorted(allocator.snapshot()["devices"][i]["holder"] for i in (0, 1)) == ["root-run", "root-run"]


def test_without_root_and_without_configuration_the_ledger_is_per_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBELAB_MACHINE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    monkeypatch.setattr("kubelab.backends.local.gpus.SHARED_MACHINE_DIR", tmp_path / "absent")
    directory = machine_dir()
    assert directory == tmp_path / "home" / ".kubelab" / "machine"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
