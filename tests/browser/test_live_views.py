"""The sidebar while the server is busy, as a user saw it break: a PQL filter typed while
runs are being created, the Run button following the tab in front, the Schedules list
following the CLI. One server and one page; the tests run in file order.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect
from test_sidebar import WAIT_MS, open_panel, sidebar


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


def kubelab_cli(server: JupyterServer, *args: str) -> str:
    """The `kubelab` command as a user in a terminal beside the lab runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", *args],
        env=server.env,
        cwd=server.root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_schedules_list_follows_the_cli_and_changes_them(lab_server: JupyterServer, page: Page) -> None:
    page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="kubelab:pipelines"]').click()
    panel = page.locator('[id="kubelab:pipelines"]')
    expect(panel).to_be_visible(timeout=10_000)
    spec = {
        "name": "berlin-morning",
        "command": [sys.executable, "-c", "pass"],
        "schedule": {"cron": "0 9 * * *", "timezone": "Europe/Berlin"},
    }
    (lab_server.root / "morning.json").write_text(json.dumps(spec))
    kubelab_cli(lab_server, "schedule", "add", "-f", "morning.json")
    (record,) = lab_server.get("schedules").json()["items"]
    item = panel.locator(f'.jp-kubelab-Schedule[data-schedule-id="{record["id"]}"]')
    expect(item).to_contain_text("berlin-morning", timeout=30_000)  # no reload: the stream brought it
    berlin = datetime.fromisoformat(record["next_at"].replace("Z", "+00:00")).astimezone(
        ZoneInfo("Europe/Berlin")
    )
    assert berlin.hour == 9
    expect(item.locator(".jp-kubelab-Schedule-next")).to_contain_text(f"next {berlin:%Y-%m-%d} 09:00 GMT+")
    expect(item.locator(".jp-kubelab-Schedule-last")).to_have_text("not fired yet")

    item.get_by_role("button", name="Pause").click()
    expect(item).to_have_attribute("data-paused", "true")
    assert lab_server.get(f"schedules/{record['id']}").json()["paused"] is True
    kubelab_cli(lab_server, "schedule", "resume", record["id"])
    expect(item).to_have_attribute("data-paused", "false", timeout=30_000)

    kubelab_cli(lab_server, "schedule", "fire", record["id"])
    expect(item.locator(".jp-kubelab-Schedule-last")).to_contain_text("GMT+", timeout=30_000)
    fired = lab_server.get(f"schedules/{record['id']}").json()["fires"][-1]
    expect(item.locator(".jp-kubelab-Schedule-last")).to_contain_text(fired["state"], timeout=30_000)

    item.get_by_role("button", name="Delete").click()
    page.locator(".jp-Dialog").get_by_role("button", name="Delete").click()
    expect(item).to_have_count(0)
    assert lab_server.get(f"schedules/{record['id']}").status_code == 404
    kubelab_cli(lab_server, "schedule", "add", "-f", "morning.json")
    expect(panel.locator(".jp-kubelab-Schedule")).to_have_count(1, timeout=30_000)
    kubelab_cli(lab_server, "schedule", "rm", lab_server.get("schedules").json()["items"][0]["id"])
    expect(panel.locator(".jp-kubelab-Schedule")).to_have_count(0, timeout=30_000)


def tabs(page: Page) -> list[str]:
    """The main area's tab ids, kubelab's only."""
    ids: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('#jp-main-dock-panel .lm-DockPanel-widget')]"
        ".map(node => node.id).filter(id => id.startsWith('kubelab-'))"
    )
    return sorted(ids)


def test_links_open_views_and_a_reload_brings_the_tabs_back(lab_server: JupyterServer, page: Page) -> None:
    run_id = quick_run(lab_server, "linked")
    assert lab_server.wait_for(run_id)["status"] == "Succeeded"
    sweep = lab_server.post(
        "sweeps",
        {
            "name": "linked-sweep",
            "space": {"x": {"_type": "choice", "_value": [0.5]}},
            "objective": {"metric": "loss"},
            "tuner": "grid",
            "trial": {"command": [sys.executable, "-c", "import kubelab; kubelab.report(loss=1.0)"]},
        },
    )
    assert sweep.status_code == 201, sweep.text
    sweep_id = sweep.json()["id"]

    page.goto(f"{lab_server.url}lab?kubelab=run/{run_id}&token={lab_server.token}")
    expect(page.locator(f'[id="kubelab-experiment-view-{run_id}"]')).to_be_visible(timeout=WAIT_MS)
    assert "kubelab=" not in page.url  # served once; from now on the layout keeps the tab
    lab_server.saved_in_workspace("kubelab-experiment:", run_id)
    page.goto(f"{lab_server.url}lab?kubelab=sweep/{sweep_id}&token={lab_server.token}")
    expect(page.locator(f'[id="kubelab-sweep-view-{sweep_id}"]')).to_be_visible(timeout=WAIT_MS)
    expect(page.locator(f'[id="kubelab-experiment-view-{run_id}"]')).to_be_attached()  # restored

    # Compare from the sidebar, twice: one tab.
    open_panel(page)
    compare = sidebar(page).locator('.jp-Toolbar-item[data-jp-item-name="compare"] button')
    compare.click()
    compare.click()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs")).to_have_count(1)
    page.locator(".jp-kubelab-Compare").get_by_role("checkbox", name="Compare linked", exact=True).check()

    # TensorBoard tabs are titled with their run.
    started = lab_server.post("tensorboards", {"experiments": [run_id]})
    assert started.status_code in (200, 201), started.text
    session = sidebar(page).locator(f'.jp-kubelab-TensorBoard[data-tensorboard-id="{started.json()["id"]}"]')
    session.locator(".jp-kubelab-TensorBoard-open").click()
    expect(
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="TensorBoard · linked")
    ).to_be_visible(timeout=WAIT_MS)

    before = tabs(page)
    assert len(before) == 4, before  # the run, the sweep, Compare, TensorBoard
    lab_server.saved_in_workspace("kubelab-compare:", run_id)  # what is ticked, with the tabs
    page.reload()
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    expect(page.locator(f'[id="kubelab-sweep-view-{sweep_id}"]')).to_be_attached(timeout=WAIT_MS)
    assert len(tabs(page)) == 4, tabs(page)
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs").click()
    ticked = page.locator(".jp-kubelab-Compare").get_by_role("checkbox", name="Compare linked", exact=True)
    expect(ticked).to_be_checked(timeout=WAIT_MS)  # what was ticked, not what it opened with
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="TensorBoard · linked").locator(
        ".lm-TabBar-tabCloseIcon"
    ).click()
    assert page.problems == []  # type: ignore[attr-defined]


def test_compare_searches_sorts_pins_and_holds_rows_still(lab_server: JupyterServer, page: Page) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs").click()
    view = page.locator(".jp-kubelab-Compare")
    table = view.locator(".jp-kubelab-RunTable")
    names = table.locator(".jp-kubelab-RunTable-row .jp-kubelab-RunTable-name button")
    for index in range(40):
        quick_run(lab_server, f"bulk-{index}")
    total = lab_server.get("experiments").json()["total"]
    assert total > 50, total
    expect(view.locator(".jp-kubelab-RunTable-count")).to_contain_text(
        f"{total + 1} rows", timeout=WAIT_MS
    )  # and the sweep's row
    assert names.count() < total  # only the rows in sight are drawn
    expect(names.first).to_have_text("linked")  # ticked (in the previous test): pinned on top

    view.get_by_label("Search runs").fill("bulk-1")  # bulk-1 and bulk-10 … bulk-19
    expect(names).to_have_count(12)
    shown = names.all_inner_texts()
    assert shown[0] == "linked" and all(name.startswith("bulk-1") for name in shown[1:]), shown

    table.locator('th[data-column="name"] button').click()  # ascending, in natural order
    expect(table.locator('th[data-column="name"]')).to_have_attribute("aria-sort", "ascending")
    shown = names.all_inner_texts()[1:]
    numbers = [int(name.split("-")[1]) for name in shown]
    assert numbers == [1, *range(10, 20)], shown  # natural order: bulk-1 before bulk-10
    view.get_by_label("Search runs").fill("")
    table.locator('th[data-column="name"] button').click()
    table.locator('th[data-column="name"] button').click()  # back to the order runs came in
    expect(table.locator('th[data-column="name"]')).to_have_attribute("aria-sort", "none")

    # A run arriving while the pointer is over the table waits: the rows under it stay put.
    second = table.locator(".jp-kubelab-RunTable-row").nth(1)
    second.hover()
    before = names.all_inner_texts()[:5]
    quick_run(lab_server, "arrived")
    expect(view.locator(".jp-kubelab-RunTable-count")).to_contain_text("1 new", timeout=WAIT_MS)
    assert names.all_inner_texts()[:5] == before
    second.locator("input[type=checkbox]").check()  # ticked where it is, pinned when the pointer leaves
    assert names.all_inner_texts()[:5] == before
    page.mouse.move(5, 5)
    expect(names.nth(2)).to_have_text("arrived")  # the two pinned, then the newest run
    assert page.problems == []  # type: ignore[attr-defined]


def test_a_stopped_run_is_resumed_from_its_view(lab_server: JupyterServer, page: Page) -> None:
    root = lab_server.root
    (root / "resumable.py").write_text(
        "import os, time\nwhile not os.path.exists('resume-go'):\n    time.sleep(0.05)\nprint('went on')\n"
    )
    made = lab_server.post("experiments", {"name": "resumable", "command": [sys.executable, "resumable.py"]})
    assert made.status_code == 201, made.text
    run_id = made.json()["id"]
    lab_server.wait_for(run_id, states={"Running"})
    page.goto(f"{lab_server.url}lab?kubelab=run/{run_id}&token={lab_server.token}")
    view = page.locator(f'[id="kubelab-experiment-view-{run_id}"]')
    expect(view).to_be_visible(timeout=WAIT_MS)
    resume = view.get_by_role("button", name="Resume", exact=True)
    expect(resume).to_have_count(0)  # running: nothing to resume
    view.get_by_role("button", name="Stop", exact=True).click()
    expect(view.locator(".jp-kubelab-Detail-status")).to_have_text("Stopped", timeout=WAIT_MS)
    resume.click()
    assert lab_server.wait_for(run_id, states={"Running"})["status"] == "Running"
    expect(view.locator(".jp-kubelab-Detail-status")).to_have_text("Running", timeout=WAIT_MS)
    expect(resume).to_have_count(0)
    history = lab_server.get(f"experiments/{run_id}").json()["history"]
    assert [h["reason"] for h in history if h["state"] == "Queued"][
        -1
    ] == "resumed from the start (no checkpoint)"
    (root / "resume-go").touch()
    expect(view.locator(".jp-kubelab-Detail-status")).to_have_text("Succeeded", timeout=WAIT_MS)
    assert lab_server.get(f"experiments/{run_id}").json()["status"] == "Succeeded"
    assert page.problems == []  # type: ignore[attr-defined]
