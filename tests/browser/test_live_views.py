"""The sidebar while the server is busy, as a user saw it break: a PQL filter typed while
runs are being created, the Run button following the tab in front, the Schedules list
following the CLI. One server and one page; the tests run in file order.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest
from browser.test_sidebar import WAIT_MS, open_panel, sidebar
from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect


def quick_run(server: JupyterServer, name: str) -> str:
    response = server.post("experiments", {"name": name, "command": [sys.executable, "-c", "pass"]})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


@pytest.fixture
def busy_server(lab_server: JupyterServer) -> Iterator[list[str]]:
    """Runs named noise-N created about three a second until the test ends (their ids)."""
    stop = threading.Event()
    created: list[str] = []

    def create() -> None:
        while not stop.is_set():
            created.append(quick_run(lab_server, f"noise-{len(created)}"))
            stop.wait(0.3)

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    try:
        yield created
    finally:
        stop.set()
        thread.join(timeout=30)


def test_the_page_loads(lab_server: JupyterServer, page: Page) -> None:
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    expect(sidebar(page).locator("[data-stream-state]")).to_have_attribute(
        "data-stream-state", "live", timeout=WAIT_MS
    )


def test_a_filter_typed_while_runs_arrive_applies_and_keeps_applying(
    lab_server: JupyterServer, page: Page, busy_server: list[str]
) -> None:
    kept = quick_run(lab_server, "kept")
    rows = sidebar(page).locator(".jp-kubelab-ExperimentsSection .jp-kubelab-Row")
    expect(sidebar(page).locator(f'.jp-kubelab-Row[data-experiment-id="{kept}"]')).to_be_attached(
        timeout=WAIT_MS
    )
    deadline = time.monotonic() + 60
    while len(busy_server) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    box = sidebar(page).get_by_label("Filter experiments (PQL)")
    box.click()
    page.keyboard.type("name:kept", delay=30)  # no Enter: the pause in typing applies it
    expect(rows).to_have_count(1, timeout=10_000)
    # New runs keep arriving; none that fails the filter is shown, and none twice.
    seen_noise = len(busy_server)
    deadline = time.monotonic() + 60
    while len(busy_server) < seen_noise + 6 and time.monotonic() < deadline:
        ids = rows.evaluate_all("rows => rows.map(row => row.dataset.experimentId)")
        assert ids == [kept], ids
        time.sleep(0.2)
    assert len(busy_server) >= seen_noise + 6, "the server stopped creating runs"
    box.fill("name:noise%")
    box.press("Enter")
    expect(rows.first).to_contain_text("noise", timeout=10_000)
    ids = rows.evaluate_all("rows => rows.map(row => row.dataset.experimentId)")
    assert len(ids) == len(set(ids)), ids
    box.fill("")
    box.press("Enter")



def test_the_run_button_follows_the_tab_in_front(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "train.py").write_text("print('hi')\n")
    run = sidebar(page).locator('.jp-Toolbar-item[data-jp-item-name="run"] button')
    expect(run).to_be_disabled()  # the launcher is in front
    page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]').click()
    listing = page.locator(".jp-DirListing-item", has_text="train.py").first
    expect(listing).to_be_visible(timeout=WAIT_MS)
    listing.dblclick()
    expect(
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current", has_text="train.py")
    ).to_be_visible(timeout=WAIT_MS)
    open_panel(page)
    expect(run).to_be_enabled()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Launcher").click()
    expect(run).to_be_disabled()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="train.py").click()
    expect(run).to_be_enabled()
