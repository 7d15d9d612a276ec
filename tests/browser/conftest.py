"""Browser tests: a real JupyterLab with the built kubelab extension, driven by Chromium.

The extension must be built first (`jlpm build` or `jlpm build:prod`, which write
`kubelab/labextension/`). The `lab_server` fixture links that build into a private
`JUPYTER_PATH`, so the tests load exactly what was just built whatever is (or is not)
installed in the virtualenv, and never touch the virtualenv itself. One server and one
browser page serve a whole module: JupyterLab's first load is the slow part.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import ConsoleMessage, Page, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for the shared helpers

from jupyter_server_process import JupyterServer
from leftover_processes import assert_none_left

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "kubelab" / "labextension"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("KUBELAB_CHROMIUM", "/usr/bin/chromium")  # never a downloaded one
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def built_extension() -> Path:
    """The build output, checked to be kubelab's, or a failure saying how to build it."""
    manifest = BUILD / "package.json"
    if not manifest.exists():
        pytest.fail(f"{manifest} is missing: build the extension first with `jlpm build`")
    data = json.loads(manifest.read_text())
    if data.get("name") != "kubelab" or "_build" not in data.get("jupyterlab", {}):
        pytest.fail(f"{manifest} is not a kubelab build output: rebuild with `jlpm build`")
    if not (BUILD / "schemas" / "kubelab" / "plugin.json").exists():
        pytest.fail("the build has no settings schema: rebuild with `jlpm build`")
    return BUILD


def lab_at(tmp_path: Path, **extra_env: str) -> JupyterServer:
    """JupyterLab on a free port with kubelab's server extension and this build (not started)."""
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
        "KUBELAB_STOP_GRACE": "2",
        **extra_env,
    }
    # No news or update checks: the test browser has no internet and no toast should cover
    # the screenshot.
    settings = tmp_path / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    extra = ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    return JupyterServer(tmp_path / "root", tmp_path / "kubelab", app="lab", env=env, extra=extra)


@contextlib.contextmanager
def serving(server: JupyterServer, folder: Path) -> Iterator[JupyterServer]:
    """`server` started; at the end the work it runs stopped, then the server, and a failure if
    a runner, warm helper or run process of `folder` (the test's own) is still alive."""
    with server:
        try:
            yield server
        finally:
            with contextlib.suppress(requests.RequestException):  # a server the test brought down
                server.stop_work()
    assert_none_left(folder)


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """JupyterLab on a free port with kubelab's server extension and this build."""
    folder = tmp_path_factory.mktemp("lab")
    with serving(lab_at(folder), folder) as server:
        yield server


@pytest.fixture(scope="module")
def page(lab_server: JupyterServer) -> Iterator[Page]:
    """One headless Chromium page for the module, with console problems collected."""
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium, or set KUBELAB_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1500, "height": 950})
        try:
            page = context.new_page()
            problems: list[str] = []
            page.problems = problems  # type: ignore[attr-defined]

            def watch(message: ConsoleMessage) -> None:
                if message.type in ("error", "warning") and "kubelab" in message.text:
                    problems.append(message.text)

            page.on("console", watch)
            page.on("pageerror", lambda error: problems.append(str(error)))
            yield page
        finally:
            context.close()
            browser.close()


def runs_after_submit(server: JupyterServer, page: Page, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The runs the server lists once a dialog's submit reached it. The dialog closes before
    its request is answered (so an immediate listing can be empty); a refused submit opens it
    again, and then this returns at once with what is listed."""
    deadline = time.monotonic() + timeout
    while True:
        items: list[dict[str, Any]] = server.get("experiments").json()["items"]
        if items or time.monotonic() > deadline or page.locator(".jp-Dialog").count():
            return items
        time.sleep(0.2)
