"""Each environment test gets its own kubelab home; uv works offline from a folder of tiny wheels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from local_wheels import make_wheel

from kubelab.experiments import Experiments


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Experiments]:
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_STOP_GRACE", "2")
    monkeypatch.setenv("UV_OFFLINE", "1")  # never PyPI: what is not in ./wheels does not resolve
    monkeypatch.delenv("KUBELAB_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    lab = Experiments()
    yield lab
    for record in lab.list("status:pending|queued|building|running")[0]:
        lab.stop(record["id"])


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    folder = tmp_path / "wheels"
    for name in ("tinyalpha", "tinybeta", "tinygamma"):
        make_wheel(folder, name, "1.0")
    make_wheel(folder, "tinyalpha", "2.0")
    return folder
