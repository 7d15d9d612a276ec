"""The local hub on a fresh machine, as docs/jupyterhub.md describes it, driven by Chromium.

`kubelab hub` runs as root with the shipped PAM login and a Python every user can run (a
virtualenv of this checkout in an open folder, see `world_python`). A new system account with a
password logs in through the hub's page, starts a notebook server (which runs as that account),
and submits an experiment from the notebook page through kubelab's REST API with the page's own
XSRF cookie; the experiment runs as that account and succeeds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from system_users import needs_root, system_user
from world_python import remove, world_python

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spawner"))
from hub_process import Hub, local_hub_env
from hub_process import open_folder as open_folder_at

pytestmark = needs_root
PASSWORD = "fresh-machine-pw-7"

# As JupyterLab itself asks: the page's cookie and its XSRF token, on every request (JupyterHub's
# single-user servers want the token on cookie-authenticated GETs too).
CALL = """async ([method, path, body]) => {
  const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || '';
  const reply = await fetch(path, {
    method, credentials: 'same-origin', body: body === null ? undefined : JSON.stringify(body),
    headers: {'Content-Type': 'application/json', 'X-XSRFToken': decodeURIComponent(xsrf)}});
  return {status: reply.status, body: await reply.json()};
}"""


@pytest.fixture(scope="module")
def open_folder() -> Iterator[Path]:
    with open_folder_at("kubelab-fresh-hub-") as folder:
        yield folder


@pytest.fixture(scope="module")
def root_hub(open_folder: Path) -> Iterator[Hub]:
    python = world_python(open_folder / "python")
    root = open_folder / "hub-root"
    env = local_hub_env(
        open_folder,
        KUBELAB_HUB_AUTH="pam",  # the shipped default: system accounts, their own passwords
        KUBELAB_HUB_ROOT=str(root),
        KUBELAB_HUB_PASSWORD="",
    )
    hub = Hub(
        open_folder / "hub",
        "c.LocalKubeLabSpawner.start_timeout = 120\n",
        env,
        python=str(python),
        kubelab_hub=True,
    )
    try:
        with hub:
            yield hub
    finally:
        remove(python)


def login_and_start(page: Page, hub: Hub, user: str) -> None:
    page.goto(f"{hub.url}/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url("**/hub/spawn**", timeout=60_000)  # the spawn form: GPUs, memory, group
    page.click("form#spawn_form input[type=submit], form#spawn_form button[type=submit]")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=180_000)
    try:
        page.wait_for_selector("#jp-main-dock-panel", timeout=90_000)
    except PlaywrightTimeoutError:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "local-hub-fresh-machine.png"))
        raise AssertionError(
            f"JupyterLab did not render for {user}:\n{page.content()[:3000]}\n{hub.log_tail()}"
        ) from None


def test_a_new_system_user_logs_in_starts_a_notebook_and_runs_an_experiment(root_hub: Hub) -> None:
    with system_user(prefix="klb", password=PASSWORD) as account, sync_playwright() as playwright:
        user = account.pw_name
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context().new_page()
            login_and_start(page, root_hub, user)
            workspace = Path(root_hub.env["KUBELAB_HUB_ROOT"]) / "workspaces" / user
            assert workspace.stat().st_uid == account.pw_uid and workspace.stat().st_mode & 0o777 == 0o700

            spec = {
                "name": "from-the-page",
                "command": ["python", "-c", "import os, kubelab; kubelab.report_final({'uid': os.getuid()})"],
            }
            api = f"/user/{user}/kubelab/api/experiments"
            submitted = page.evaluate(CALL, ["POST", api, spec])
            assert submitted["status"] == 201, (submitted, root_hub.log_tail())
            run_id = submitted["body"]["id"]
            seen: dict[str, Any] = {}
            for _ in range(240):
                seen = page.evaluate(CALL, ["GET", f"{api}/{run_id}", None])
                if seen["body"].get("status") in ("Succeeded", "Failed", "Stopped"):
                    break
                time.sleep(0.5)
            assert seen["status"] == 200 and seen["body"]["status"] == "Succeeded", seen
            assert seen["body"]["metrics"] == {"uid": account.pw_uid}, seen["body"]  # it ran as the user
        finally:
            browser.close()
            root_hub.api("DELETE", f"users/{user}/server")
            root_hub.wait_server(user, ready=False, timeout=60)
