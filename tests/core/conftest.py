"""Every core test gets its own kubelab home and its own machine-wide GPU ledger."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubelab.experiments import Experiments


@pytest.fixture
def lab_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_STOP_GRACE", "2")
    monkeypatch.delenv("KUBELAB_FAKE_GPUS", raising=False)
    monkeypatch.delenv("KUBELAB_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def lab(lab_env: Path) -> Iterator[Experiments]:
    lab = Experiments()
    yield lab
    # A failed test must not leave its experiments running on the machine.
    for record in lab.list("status:pending|queued|running")[0]:
        lab.stop(record["id"])


@pytest.fixture
def cli(lab_env: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`kubelab ARGS...` in its own process, in the test's lab; its exit code checked."""

    def run(*args: str, check_rc: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kubelab.cli", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            cwd=lab_env,
            timeout=120,
        )
        if check_rc is not None:
            assert done.returncode == check_rc, done.stdout + done.stderr
        return done

    return run
