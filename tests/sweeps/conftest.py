"""Fixtures for the sweep-running suites (driver, NNI, REST, CLI): a private kubelab home,
GPU ledger and workspace per test, and the `Sweeps` service (the waiting helpers are in
sweep_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from driver_support import stop_leftovers

from kubelab.experiments import Experiments
from kubelab.sweeps.service import Sweeps


@pytest.fixture
def sweep_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_STOP_GRACE", "2")
    for name in ("KUBELAB_FAKE_GPUS", "KUBELAB_API_URL", "KUBELAB_SWEEP_CRASH", "KUBELAB_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work
    stop_leftovers(tmp_path / "home")


@pytest.fixture
def sweeps(sweep_env: Path) -> Sweeps:
    return Sweeps(Experiments())
