"""Checkpoints on the trial side: atomic saves, the latest, pruning, and a SIGTERM to save on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from kubelab_testing import wait_until

import kubelab
from kubelab.experiments import Experiments


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBELAB_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    return tmp_path / "ckpt"


def write_text(text: str) -> Callable[[Path], int]:
    return lambda d: (d / "state.txt").write_text(text)


def latest() -> tuple[int, Path]:
    found = kubelab.latest_checkpoint()
    assert found is not None
    return found


def test_saves_keep_the_newest_two_and_latest_names_the_newest(folder: Path) -> None:
    assert kubelab.latest_checkpoint() is None
    for step in (10, 20, 30):
        kubelab.save_checkpoint(step, write_text(f"at {step}"))
    step, path = latest()
    assert step == 30 and (path / "state.txt").read_text() == "at 30"
    assert sorted(p.name for p in folder.iterdir()) == ["step-000000000020", "step-000000000030"]
    kubelab.save_checkpoint(40, write_text("at 40"), keep=1)
    assert [p.name for p in folder.iterdir()] == ["step-000000000040"]


def test_a_writer_that_raises_leaves_the_previous_checkpoint_the_latest(folder: Path) -> None:
    kubelab.save_checkpoint(1, write_text("good"))

    def broken(d: Path) -> None:
        (d / "half.bin").write_bytes(b"\0" * 10)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        kubelab.save_checkpoint(2, broken)
    step, path = latest()
    assert step == 1 and (path / "state.txt").read_text() == "good"
    assert [p.name for p in folder.iterdir()] == ["step-000000000001"]  # no partial folder left


def test_a_partial_folder_from_a_killed_writer_is_never_the_latest_and_is_cleaned(folder: Path) -> None:
    kubelab.save_checkpoint(5, write_text("five"))
    (folder / ".partial-9-123-1").mkdir()  # a process killed while writing step 9
    (folder / "step-bogus").mkdir()
    assert latest()[0] == 5
    kubelab.save_checkpoint(6, write_text("six"))
    assert not (folder / ".partial-9-123-1").exists()


def test_saving_a_step_again_replaces_it_and_bad_arguments_are_refused(folder: Path) -> None:
    kubelab.save_checkpoint(3, write_text("first"))
    kubelab.save_checkpoint(3, write_text("second"))
    step, path = latest()
    assert step == 3 and (path / "state.txt").read_text() == "second"
    with pytest.raises(ValueError, match="step must be a whole number"):
        kubelab.save_checkpoint(-1, write_text("x"))
    with pytest.raises(ValueError, match="keep must be a whole number >= 1"):
        kubelab.save_checkpoint(4, write_text("x"), keep=0)


LOOP = textwrap.dedent(
    """
    import sys, time, kubelab
    start = (kubelab.latest_checkpoint() or (0, None))[0]
    print("restart", kubelab.restart_count(), "from", start, flush=True)
    step = start
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        step += 1
        if kubelab.preempted():
            kubelab.save_checkpoint(step, lambda d: (d / "s").write_text(str(step)))
            print("saved", step, flush=True)
            sys.exit(0)
        if step == start + 3:
            print("ready", flush=True)
        time.sleep(0.01)
    """
)


def test_sigterm_lets_a_training_loop_save_before_it_exits(folder: Path, tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    assert process.stdout.readline().startswith("restart 0 from 0")
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=30)
    assert process.returncode == 0 and out.startswith("saved ")
    saved = int(out.split()[1])
    assert kubelab.latest_checkpoint() == (saved, folder / f"step-{saved:012d}")


def test_a_local_run_gets_a_checkpoint_folder_in_its_run_directory(lab: Experiments, lab_env: Path) -> None:
    body = "import kubelab; kubelab.save_checkpoint(7, lambda d: (d / 'w').write_text('x')); print(kubelab.checkpoint_dir())"
    record = lab.submit({"command": ["python", "-c", body]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    run_dir = lab.runs_root / record["id"]
    assert str(run_dir / "checkpoints") in "".join(lab.logs(record["id"]))
    assert (run_dir / "checkpoints" / "step-000000000007" / "w").read_text() == "x"
