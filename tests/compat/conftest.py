"""Compatibility suites: a private kubelab home per test, the `kubelab` CLI in real
subprocesses, and the NNI/Polyaxon fixtures (written from those projects' documentation)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from driver_support import stop_leftovers

if TYPE_CHECKING:
    from kubelab.sweeps.service import Sweeps
from collections.abc import Callable, Iterator

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def compat_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_STOP_GRACE", "2")
    for name in ("KUBELAB_FAKE_GPUS", "KUBELAB_API_URL", "KUBELAB_SWEEP_CRASH", "KUBELAB_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    shutil.copytree(FIXTURES, work)  # runs write nothing into the repository
    monkeypatch.chdir(work)
    yield work
    stop_leftovers(tmp_path / "home")


@pytest.fixture
def cli(compat_env: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        *args: str, rc: int | None = 0, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kubelab.cli", *args],
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            cwd=compat_env,
            timeout=180,
        )
        if rc is not None:
            assert done.returncode == rc, done.stdout + done.stderr
        return done

    return run


@pytest.fixture
def sweeps(compat_env: Path) -> Sweeps:
    from kubelab.experiments import Experiments
    from kubelab.sweeps.service import Sweeps

    return Sweeps(Experiments())
