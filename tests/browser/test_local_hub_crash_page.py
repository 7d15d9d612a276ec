"""What a user sees in Chromium when their local notebook server dies before it is ready: the
spawn-pending page names the cause (the line of the server's stderr that says why), not
JupyterHub's "Spawner failed to start [status=1]. The logs ... may contain details."

A real JupyterHub with `LocalKubeLabSpawner` (servers as the hub's account); the user's own
Jupyter config, in their workspace (their HOME), names a class that cannot be imported, so the
real `jupyterhub-singleuser` exits with status 1. `slow_spawn_timeout = 0` sends the form to the
pending page at once, as a slow machine does.
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from playwright.sync_api import expect, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spawner"))
from hub_process import PASSWORD, Hub, local_hub_env
from hub_process import open_folder as open_folder_at


@pytest.fixture
def open_folder() -> Iterator[Path]:
    with open_folder_at("kubelab-crash-page-") as folder:
        yield folder


def test_the_pending_page_names_why_the_server_died(open_folder: Path) -> None:
    me = os.environ.get("USER") or getpass.getuser()
    config = open_folder / "root" / "workspaces" / me / ".jupyter"
    config.mkdir(parents=True)
    (config / "jupyter_server_config.py").write_text(
        "c.ServerApp.kernel_manager_class = 'kubelab_no_such_module.Manager'\n"
    )
    hub = Hub(
        open_folder / "hub",
        "c.LocalKubeLabSpawner.start_timeout = 60\n"
        "c.LocalKubeLabSpawner.run_as_users = False\n"
        "c.JupyterHub.tornado_settings = {'slow_spawn_timeout': 0}\n",
        local_hub_env(open_folder),
    )
    with hub, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context().new_page()
            page.goto(f"{hub.url}/hub/login")
            page.fill("input[name=username]", me)
            page.fill("input[name=password]", PASSWORD)
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url("**/hub/spawn**", timeout=60_000)
            page.click("form#spawn_form input[type=submit], form#spawn_form button[type=submit]")
            page.wait_for_url("**/hub/spawn-pending/**", timeout=60_000)
            message = page.locator("#progress-message")
            try:
                expect(message).to_contain_text("Spawn failed", timeout=90_000)
            except AssertionError:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "local-hub-crash-page.png"))
                raise AssertionError(f"{page.content()[-3000:]}\n{hub.log_tail()}") from None
            shown = message.inner_text()
            assert (
                f"the notebook server for {me} stopped before it answered: it exited with status 1" in shown
            )
            assert "'kubelab_no_such_module.Manager' could not be imported" in shown, shown
            assert "server.log" in shown and "Spawner failed to start" not in page.content()
        finally:
            browser.close()
