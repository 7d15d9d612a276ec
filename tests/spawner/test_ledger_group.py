"""The GPU ledger a root hub shares with its users' servers through one group: no member can
take it from the others, and a fresh hub's first look does not shut them out.

Each test uses real system accounts in the ledger's group, running kubelab's own allocator as
their servers would.
"""

from __future__ import annotations

import grp
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from system_users import needs_root, system_user
from world_python import remove, world_python

from kubelab.spawner.local import LocalKubeLabSpawner

pytestmark = needs_root

SNAPSHOT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from kubelab.backends.local.gpus import Gpu, GpuAllocator
    ledger = GpuAllocator([Gpu(0, "T4")], Path(sys.argv[1]))
    print(ledger.try_acquire("member-run", 1, 1), ledger.snapshot()["free"])
    ledger.release("member-run")
    """
)


@pytest.fixture(scope="module")
def lab() -> Iterator[dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="kubelab-ledger-members-"))
    base.chmod(0o755)
    python = world_python(base / "python")
    group = "klg" + os.urandom(3).hex()
    try:
        with system_user("klma") as alice, system_user("klmb") as bob:
            yield {"base": base, "python": python, "group": group, "alice": alice, "bob": bob}
    finally:
        subprocess.run(["groupdel", group], capture_output=True)
        remove(python)
        shutil.rmtree(base, ignore_errors=True)


def hub_spawner(lab: dict[str, Any], machine: Path, monkeypatch: pytest.MonkeyPatch) -> LocalKubeLabSpawner:
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(machine))
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "Tesla T4")
    spawner = LocalKubeLabSpawner(
        user=SimpleNamespace(name=lab["alice"].pw_name), root=str(lab["base"] / "hub"), run_as_users=True
    )
    spawner.ledger_group = lab["group"]
    return spawner


def hub_looks(spawner: LocalKubeLabSpawner) -> None:
    """What a hub does with the ledger around a spawn: the form first, then the server's start."""
    spawner.availability()
    spawner.make_preexec_fn(spawner.user.name)


def as_member(lab: dict[str, Any], who: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """`argv` as that account with the ledger's group, as the hub starts its server."""
    entry, gid = lab[who], grp.getgrnam(lab["group"]).gr_gid

    def become() -> None:
        os.setgid(entry.pw_gid)
        os.setgroups([entry.pw_gid, gid])
        os.setuid(entry.pw_uid)

    env = {"HOME": entry.pw_dir, "PATH": "/usr/bin:/bin"}
    return subprocess.run(argv, preexec_fn=become, capture_output=True, text=True, env=env, timeout=120)


def test_a_fresh_hubs_first_look_leaves_the_ledger_usable_by_every_member(
    lab: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = lab["base"] / "fresh" / "machine"
    spawner = hub_spawner(lab, machine, monkeypatch)
    hub_looks(spawner)  # the spawn form opens the ledger before any server's start shares it
    gid = grp.getgrnam(lab["group"]).gr_gid
    for name in ("gpus.lock", "gpus.json"):
        info = (machine / name).lstat()
        assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, gid, 0o660), name
    assert stat.S_IMODE(machine.stat().st_mode) == 0o3770
    used = as_member(lab, "alice", [str(lab["python"]), "-c", SNAPSHOT, str(machine)])
    assert used.returncode == 0 and used.stdout.split() == ["[0]", "0"], used.stderr[-2000:]


def test_a_member_cannot_remove_or_replace_the_ledger_files(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = lab["base"] / "members" / "machine"
    spawner = hub_spawner(lab, machine, monkeypatch)
    hub_looks(spawner)
    for name in ("gpus.lock", "gpus.json"):
        target = machine / name
        for attack in (["rm", "-f", str(target)], ["mv", str(target), str(machine / "mine")]):
            done = as_member(lab, "alice", attack)
            assert done.returncode != 0 and target.lstat().st_uid == 0, (attack, done)
        planted = as_member(lab, "alice", ["ln", "-sfn", "/nonexistent", str(target)])
        assert planted.returncode != 0 and not target.is_symlink(), planted


def test_a_planted_ledger_entry_is_repaired_and_its_owner_named(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    machine = lab["base"] / "planted" / "machine"
    spawner = hub_spawner(lab, machine, monkeypatch)
    hub_looks(spawner)
    (machine / "gpus.json").unlink(missing_ok=True)  # as before a hub made it: a member gets there first
    (machine / "gpus.lock").unlink(missing_ok=True)
    alice = lab["alice"].pw_name
    assert as_member(lab, "alice", ["ln", "-s", "/nonexistent", str(machine / "gpus.json")]).returncode == 0
    assert as_member(lab, "alice", ["mkfifo", "-m", "600", str(machine / "gpus.lock")]).returncode == 0
    blocked = as_member(lab, "bob", [str(lab["python"]), "-c", SNAPSHOT, str(machine)])
    assert blocked.returncode != 0  # until the hub looks again
    with caplog.at_level(logging.WARNING):
        hub_looks(spawner)
    logged = caplog.text
    assert f"gpus.json was a symbolic link of {alice}" in logged, logged
    assert f"gpus.lock was a special file of {alice}" in logged, logged
    used = as_member(lab, "bob", [str(lab["python"]), "-c", SNAPSHOT, str(machine)])
    assert used.returncode == 0 and used.stdout.split() == ["[0]", "0"], used.stderr[-2000:]


def test_a_ledger_file_closed_to_a_member_is_a_sentence_then_repaired(
    lab: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    machine = lab["base"] / "closed" / "machine"
    spawner = hub_spawner(lab, machine, monkeypatch)
    hub_looks(spawner)
    os.chmod(machine / "gpus.lock", 0o600)  # as an older hub's first look left it
    closed = as_member(lab, "alice", [str(lab["python"]), "-c", SNAPSHOT, str(machine)])
    assert closed.returncode != 0
    assert "gpus.lock is closed to this account (root's, mode 600)" in closed.stderr, closed.stderr[-2000:]
    with caplog.at_level(logging.WARNING):
        hub_looks(spawner)
    assert "gpus.lock was a file of root" in caplog.text, caplog.text
    used = as_member(lab, "alice", [str(lab["python"]), "-c", SNAPSHOT, str(machine)])
    assert used.returncode == 0 and used.stdout.split() == ["[0]", "0"], used.stderr[-2000:]
