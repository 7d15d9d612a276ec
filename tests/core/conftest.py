"""Every core test gets its own kubelab home and its own machine-wide GPU ledger."""

from __future__ import annotations

from collections.abc import Iterator
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
