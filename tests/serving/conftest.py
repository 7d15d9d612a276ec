"""Each serving test gets its own kubelab home; whatever it started is stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubelab.serving.service import Services


@pytest.fixture
def services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Services]:
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "0")
    monkeypatch.delenv("KUBELAB_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    found = Services(tmp_path / "home")
    yield found
    for view in found.list():  # a failed test leaves no server running on the machine
        if view["state"] not in ("Stopped", "Failed"):
            found.stop(view["id"])
