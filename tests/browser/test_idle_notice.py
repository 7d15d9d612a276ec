"""The GPU culler's warning in JupyterLab: a notification that stays, with Keep running.

The notice is put on the server as the culler puts it (its REST route); the page shows it
without a reload and the button's answer reaches the server, where the culler reads it.
"""

from __future__ import annotations

import time

import requests
from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect
from test_sidebar import WAIT_MS

MESSAGE = "This server's GPUs have been under 5% busy for 25 minutes. It will be stopped at 10:30 UTC"


def test_the_idle_warning_is_shown_and_keep_running_answers_it(lab_server: JupyterServer, page: Page) -> None:
    put = requests.put(
        lab_server.api + "idle-notice",
        json={"message": MESSAGE, "deadline": time.time() + 300},
        headers=lab_server.headers,
        timeout=30,
    )
    assert put.status_code == 200, put.text
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    toast = page.locator(".Toastify__toast", has_text="under 5% busy")
    expect(toast).to_be_visible(timeout=WAIT_MS)
    toast.get_by_role("button", name="Keep running").click()
    expect(toast).to_have_count(0, timeout=WAIT_MS)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        notice = lab_server.get("idle-notice").json()["notice"]
        if notice["kept"]:
            break
        time.sleep(0.2)
    assert notice["kept"], notice
    assert not getattr(page, "problems", [])
