"""Checkpoints on the trial side: save, find the latest, and notice a preemption. Standard library only.

A run may be stopped and started again (preempted for a higher-priority run, resized, moved
off a lost node); a training loop that checkpoints resumes where it was instead of at step 0:

    import kubelab, torch

    found = kubelab.latest_checkpoint()          # (step, folder) or None
    start = 0
    if found:
        start, folder = found
        model.load_state_dict(torch.load(folder / "model.pt"))
    for step in range(start + 1, 1000):
        ...
        if step % 100 == 0 or kubelab.preempted():
            kubelab.save_checkpoint(step, lambda d: torch.save(model.state_dict(), d / "model.pt"))
        if kubelab.preempted():
            break                                # saved; exit within the grace period

A checkpoint is a folder `step-<step>` under `checkpoint_dir()`, which survives every restart
of the run (locally under the run directory; on Kubernetes on the user's workspace claim).
`save_checkpoint` calls the writer on a fresh temporary folder and renames it into place, so a
writer that raises or a process killed mid-write never leaves a checkpoint that looks complete:
the previous one stays the latest.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHECKPOINT_DIR_ENV = "KUBELAB_CHECKPOINT_DIR"
RESTART_COUNT_ENV = "KUBELAB_RESTART_COUNT"
_NAME = re.compile(r"step-(\d+)")
_signals: dict[str, Any] = {"installed": False, "preempted": False}


def checkpoint_dir() -> Path:
    """This run's checkpoint folder (created): `KUBELAB_CHECKPOINT_DIR`, else the run's
    `checkpoints/` (a scratch run's outside kubelab)."""
    configured = os.environ.get(CHECKPOINT_DIR_ENV)
    if configured:
        folder = Path(configured)
    else:
        from kubelab.trial import run_dir

        folder = run_dir() / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def restart_count() -> int:
    """How many times this run was started again after a preemption or resize (0: first start)."""
    try:
        return max(0, int(os.environ.get(RESTART_COUNT_ENV, "0")))
    except ValueError:
        return 0


def saved_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint in `folder`, oldest first."""
    found = []
    for entry in folder.iterdir():
        match = _NAME.fullmatch(entry.name)
        if match and entry.is_dir() and not entry.is_symlink():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def step_folder(folder: Path, step: int) -> Path:
    """Where the checkpoint of `step` is (or goes) in `folder`."""
    return folder / f"step-{step:012d}"


def latest_checkpoint() -> tuple[int, Path] | None:
    """(step, folder) of the newest complete checkpoint, or None before the first save."""
    saved = saved_checkpoints(checkpoint_dir())
    return saved[-1] if saved else None


def save_checkpoint(step: int, write: Callable[[Path], object], keep: int = 2) -> Path:
    """Call `write(folder)` on a temporary folder, then make it the checkpoint of `step`.

    Keeps the newest `keep` checkpoints (at least 1). If `write` raises, its folder is removed,
    nothing else changes, and the exception goes on to the caller.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a whole number >= 0, not {step!r}")
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be a whole number >= 1, not {keep!r}")
    folder = checkpoint_dir()
    for stale in folder.glob(".partial-*"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    partial = folder / f".partial-{step}-{os.getpid()}-{threading.get_ident()}"
    partial.mkdir()
    try:
        write(partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _sync(partial)
    final = step_folder(folder, step)
    if final.exists():  # the same step saved again: the new one replaces it
        old = folder / f".partial-replaced-{step}-{os.getpid()}"
        os.replace(final, old)
        os.replace(partial, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(partial, final)
    _sync(folder)
    for _, older in saved_checkpoints(folder)[:-keep]:
        shutil.rmtree(older, ignore_errors=True)
    return final


def copy_checkpoint(source: Path, folder: Path) -> Path:
    """Copy the checkpoint folder `source` (another run's `step-N`) into `folder`, complete or
    not at all (through a temporary folder, as `save_checkpoint` writes)."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".partial-copy-{os.getpid()}-{threading.get_ident()}"
    shutil.copytree(source, partial, symlinks=True)
    _sync(partial)
    final = folder / source.name
    os.replace(partial, final)
    _sync(folder)
    return final


def _sync(folder: Path) -> None:
    """Flush the folder's entries, so a checkpoint survives the machine's crash as a whole."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def preempted() -> bool:
    """True once kubelab asked this run to stop (SIGTERM): save a checkpoint and exit.

    The first call installs the SIGTERM handler (from the main thread), so a script that never
    asks keeps Python's default: SIGTERM ends it at once.
    """
    _install_handler()
    return bool(_signals["preempted"])


def _install_handler() -> None:
    if _signals["installed"] or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Any) -> None:
        _signals["preempted"] = True
        if callable(previous):  # a handler of the script's own still runs (SIG_DFL is not callable)
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_term)
    _signals["installed"] = True
