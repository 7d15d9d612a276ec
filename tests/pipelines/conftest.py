"""Fixtures for the pipeline and schedule suites: a private kubelab home, GPU ledger and
workspace per test, the `Pipelines` service, and cleanup of every process a test left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from driver_support import stop_leftovers

from kubelab.experiments import Experiments
from kubelab.pipelines.service import Pipelines


@pytest.fixture
def pipeline_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_STOP_GRACE", "2")
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "0")
    for name in (
        "KUBELAB_FAKE_GPUS",
        "KUBELAB_API_URL",
        "KUBELAB_SWEEP_CRASH",
        "KUBELAB_PIPELINE_CRASH",
        "KUBELAB_BACKEND",
    ):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work
    stop_leftovers(tmp_path / "home")


@pytest.fixture
def pipelines(pipeline_env: Path) -> Pipelines:
    return Pipelines(Experiments())
