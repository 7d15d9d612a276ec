"""Browser tests: a real JupyterLab with the built kubelab extension, driven by Chromium.

The extension must be built first (`jlpm build` or `jlpm build:prod`, which write
`kubelab/labextension/`). The `lab_server` fixture links that build into a private
`JUPYTER_PATH`, so the test loads exactly what was just built whatever is (or is not)
installed in the virtualenv, and never touches the virtualenv itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for the shared helpers

from jupyter_server_process import JupyterServer

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "kubelab" / "labextension"


def built_extension() -> Path:
    """The build output, checked to be kubelab's, or a failure saying how to build it."""
    manifest = BUILD / "package.json"
    if not manifest.exists():
        pytest.fail(f"{manifest} is missing: build the extension first with `jlpm build`")
    data = json.loads(manifest.read_text())
    if data.get("name") != "kubelab" or "_build" not in data.get("jupyterlab", {}):
        pytest.fail(f"{manifest} is not a kubelab build output: rebuild with `jlpm build`")
    return BUILD


@pytest.fixture
def lab_theme() -> str:
    """The JupyterLab theme the server starts with; tests parametrize it."""
    return "JupyterLab Light"


@pytest.fixture
def lab_server(tmp_path: Path, lab_theme: str) -> Iterator[JupyterServer]:
    """JupyterLab on a free port with kubelab's server extension and this build."""
    extensions = tmp_path / "jupyter-path" / "labextensions"
    extensions.mkdir(parents=True)
    (extensions / "kubelab").symlink_to(built_extension(), target_is_directory=True)
    env = {
        # First in JupyterLab's search order, for both the metadata and the static files.
        "JUPYTER_PATH": str(tmp_path / "jupyter-path"),
        # No user settings or saved workspaces from this machine's ~/.jupyter.
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "KUBELAB_MACHINE_DIR": str(tmp_path / "machine"),
        "KUBELAB_FAKE_GPUS": "T4,T4",
    }
    # No news or update checks: the test browser has no internet and no toast should cover
    # the screenshot.
    settings = tmp_path / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    (settings / "themes.jupyterlab-settings").write_text(json.dumps({"theme": lab_theme}))
    extra = ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    server = JupyterServer(tmp_path / "root", tmp_path / "kubelab", app="lab", env=env, extra=extra)
    with server:
        yield server
