"""The kubelab sidebar in a real JupyterLab, driven the way a user drives it: open the
panel from the command palette, run a script from the file browser's context menu, watch
it finish with its metric, see a sweep's best trial, open TensorBoard in a tab, stop a
run from its row, filter with PQL, and read a validation error next to its field.

The tests share one server and one page and run in file order (each builds on the last).
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from browser.conftest import runs_after_submit
from jupyter_server_process import JupyterServer
from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from kubelab.records import RunDirectory

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
WAIT_MS = 90_000  # a first JupyterLab load on a busy 2-core machine
TRAIN = """\
import time, kubelab
for step in range(1, 4):
    time.sleep(1.5)
    kubelab.report(step=step, loss=1 / (step + 1) + 0.0)
"""
SWEEP_TRIAL = "import kubelab; kubelab.report(loss=(kubelab.params()['x'] - 0.5) ** 2)"


def sidebar(page: Page) -> Locator:
    return page.locator('[id="kubelab:sidebar"]')


def row(page: Page, run_id: str) -> Locator:
    return sidebar(page).locator(f'.jp-kubelab-Row[data-experiment-id="{run_id}"]')


def run_command_from_palette(page: Page, label: str) -> None:
    """Run a command from the palette; JupyterLab may still move focus while it restores
    the layout, and the modal palette closes when it loses focus, so retry a few times."""
    palette = page.locator("#modal-command-palette")
    for _ in range(5):
        page.keyboard.press("Control+Shift+C")
        try:
            expect(palette).to_be_visible(timeout=5_000)
            palette.locator("input").fill(label, timeout=5_000)
            item = palette.locator(".lm-CommandPalette-item").filter(
                has=page.locator(".lm-CommandPalette-itemLabel", has_text=re.compile(f"^{re.escape(label)}$"))
            )
            expect(item).to_have_count(1, timeout=5_000)
            item.click()
            expect(palette).to_be_hidden(timeout=5_000)
            return
        except (AssertionError, PlaywrightTimeoutError):
            page.keyboard.press("Escape")
    raise AssertionError(f"could not run {label!r} from the palette")


def widen_sidebar(page: Page, width: int) -> None:
    """Drag the left split handle so the table's columns fit."""
    stack = page.locator("#jp-left-stack").bounding_box()
    assert stack is not None
    x, y = stack["x"] + stack["width"] + 1, stack["y"] + stack["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + width, y, steps=5)
    page.mouse.up()


def file_context_menu(page: Page, name: str, item: str) -> None:
    """Right-click a file in the file browser and choose `item`."""
    if not page.locator("#filebrowser").is_visible():
        page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]').click()
    expect(page.locator("#filebrowser")).to_be_visible()
    listing = page.locator(".jp-DirListing-item", has_text=name).first
    listing.scroll_into_view_if_needed(timeout=WAIT_MS)
    expect(listing).to_be_visible(timeout=WAIT_MS)
    listing.click(button="right")
    menu_item = page.locator(".lm-Menu-item", has_text=item).first
    expect(menu_item).to_be_visible()
    menu_item.click()
    if item == "Run as experiment":
        # The dialog focuses its first field once shown; typing before that could land there.
        expect(page.locator('.jp-Dialog input[name="name"]')).to_be_focused()


def open_panel(page: Page) -> None:
    run_command_from_palette(page, "Open the Experiments sidebar")
    expect(sidebar(page)).to_be_visible(timeout=10_000)


def test_the_panel_opens_from_the_palette_and_goes_live(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "train.py").write_text(TRAIN)
    (lab_server.root / "sleep.py").write_text("import time\ntime.sleep(120)\n")
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jp-main-dock-panel")).to_be_visible(timeout=WAIT_MS)
    # The splash screen goes once every plugin (ours included) has activated.
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    expect(page.locator(".jp-Launcher")).to_be_visible(timeout=WAIT_MS)
    expect(sidebar(page)).to_be_hidden()
    open_panel(page)
    expect(sidebar(page).locator("[data-stream-state]")).to_have_attribute(
        "data-stream-state", "live", timeout=WAIT_MS
    )
    resources = sidebar(page).locator(".jp-kubelab-Resources")
    expect(resources.locator(".jp-kubelab-Sidebar-resources")).to_have_text(
        "Backend: local · 2 of 2 GPUs free"
    )
    expect(resources.locator('[data-gpu-type="T4"] .jp-kubelab-GpuType-free')).to_have_text("2/2 free")
    # What a new run would take: the ledger's answer, and a refusal naming the field.
    preview = resources.locator(".jp-kubelab-PreemptionPreview")
    expect(preview.locator(".jp-kubelab-PreemptionPreview-answer")).to_have_text("would start now on GPU 0")
    preview.locator(".jp-kubelab-PreemptionPreview-gpus").fill("3")
    expect(preview.locator(".jp-kubelab-Error")).to_contain_text(
        "gpus: asked for 3 GPU(s) but this machine has 2"
    )
    preview.locator(".jp-kubelab-PreemptionPreview-gpus").fill("1")
    expect(preview.locator(".jp-kubelab-PreemptionPreview-answer")).to_be_visible()
    expect(sidebar(page).locator(".jp-kubelab-ExperimentsSection .jp-kubelab-Sidebar-empty")).to_be_visible()


def test_a_bad_field_shows_the_servers_reason_next_to_it(lab_server: JupyterServer, page: Page) -> None:
    # A busy page (live streams, a loaded machine) runs idle callbacks late. The dialog must
    # not take the focus back to its first field then, after the user moved on.
    page.evaluate(
        "() => { window.kubelabIdle = window.requestIdleCallback;"
        " window.requestIdleCallback = callback => setTimeout(callback, 1000); }"
    )
    try:
        file_context_menu(page, "train.py", "Run as experiment")
        dialog = page.locator(".jp-Dialog")
        expect(dialog.locator(".jp-kubelab-RunForm-availability")).to_contain_text("T4: 2 of 2 free")
        memory = dialog.locator('input[name="memory"]')
        memory.fill("lots")
        page.wait_for_timeout(1500)  # past the late idle callbacks
        expect(memory).to_be_focused()
    finally:
        page.evaluate("() => { window.requestIdleCallback = window.kubelabIdle; }")
    dialog.get_by_role("button", name="Run").click()
    error = dialog.locator('.jp-kubelab-Field[data-field="memory"] .jp-kubelab-Field-error')
    expect(error).to_have_text(re.compile(r"^resources\.memory: 'lots' is not a Kubernetes quantity"))
    expect(dialog.locator('input[name="memory"]')).to_have_value("lots")  # kept for fixing
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dialog-validation.png"))
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert lab_server.get("experiments").json()["total"] == 0  # nothing was submitted


def test_run_a_script_from_the_file_browser(lab_server: JupyterServer, page: Page) -> None:
    file_context_menu(page, "train.py", "Run as experiment")
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator('input[name="name"]')).to_have_value("train")
    # The dialog cancelled in the previous test kept its values for this file.
    expect(dialog.locator('input[name="memory"]')).to_have_value("lots")
    dialog.locator('input[name="memory"]').fill("")
    dialog.locator('input[name="name"]').fill("train-ok")
    dialog.locator('textarea[name="params"]').fill("lr=0.01\nlayers=3")
    # A declared field the dialog does not lay out itself (kubelab/options.py) is shown too.
    expect(dialog.locator('input[name="seed"]')).to_have_attribute("placeholder", "random")
    dialog.locator('input[name="seed"]').fill("7")
    dialog.get_by_role("button", name="Run").click()
    expect(dialog).to_have_count(0, timeout=10_000)

    items = runs_after_submit(lab_server, page)
    assert [item["name"] for item in items] == ["train-ok"]
    run_id = items[0]["id"]
    spec = json.loads(
        RunDirectory(Path(lab_server.get(f"experiments/{run_id}").json()["run_dir"])).spec_file.read_text()
    )
    assert spec["seed"] == 7
    assert items[0]["params"] == {"lr": 0.01, "layers": 3}
    open_panel(page)
    widen_sidebar(page, 420)
    status = row(page, run_id).locator("[data-status]")
    expect(status).to_have_attribute("data-status", "Running", timeout=WAIT_MS)
    expect(status).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    expect(row(page, run_id).locator(".jp-kubelab-Row-metric")).to_have_text("loss 0.25 @3")
    expect(row(page, run_id).locator(".jp-kubelab-Row-params")).to_have_text("lr=0.01 layers=3")

    # Its view: parameters, a chart per metric, the log, the timeline.
    row(page, run_id).locator(".jp-kubelab-Row-name").click()
    view = page.locator(f'.jp-kubelab-Detail[data-experiment-id="{run_id}"]')
    expect(view.locator('.jp-kubelab-Overlay[data-metric="loss"] .jp-kubelab-Overlay-latest')).to_have_text(
        "0.25 @3", timeout=WAIT_MS
    )
    expect(view.locator(".jp-kubelab-Timeline li")).to_have_count(3)  # Pending, Running, Succeeded
    expect(view.locator(".jp-kubelab-Params")).to_contain_text("layers")


def finished_grid_sweep(lab_server: JupyterServer, page: Page, name: str) -> tuple[str, Locator]:
    """A grid sweep of three trials (x = 0.4 is best), finished: its id and its sidebar row."""
    spec = {
        "name": name,
        "space": {"x": {"_type": "choice", "_value": [0.0, 0.4, 0.9]}},
        "objective": {"metric": "loss"},
        "tuner": "grid",
        "concurrency": 2,
        "trial": {"command": [sys.executable, "-c", SWEEP_TRIAL]},
    }
    response = lab_server.post("sweeps", spec)
    assert response.status_code == 201, response.text
    sweep_id = response.json()["id"]
    item = sidebar(page).locator(f'.jp-kubelab-Sweep[data-sweep-id="{sweep_id}"]')
    expect(item).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    return sweep_id, item


def test_a_sweep_shows_its_best_trial(lab_server: JupyterServer, page: Page) -> None:
    sweep_id, item = finished_grid_sweep(lab_server, page, "ui-sweep")
    best = lab_server.get(f"sweeps/{sweep_id}").json()["best"]
    assert best["params"] == {"x": 0.4}
    expect(item.locator(".jp-kubelab-Sweep-best")).to_have_text(f"best loss 0.01 (trial #{best['trial']})")
    expect(item.locator(".jp-kubelab-Sweep-progress")).to_have_text("3/3")

    item.click()
    view = page.locator(f'.jp-kubelab-Detail[data-sweep-id="{sweep_id}"]')
    expect(view.locator(".jp-kubelab-Trials tbody tr")).to_have_count(3, timeout=WAIT_MS)
    expect(view.locator(".jp-kubelab-Trials-best")).to_have_attribute("data-trial", str(best["trial"]))
    objective = view.locator(".jp-kubelab-ObjectiveChart .jp-kubelab-Overlay")
    expect(objective.locator("canvas")).to_have_count(1)
    expect(objective.locator(".u-legend .u-series")).to_have_count(3)  # trial, trial value, best so far
    expect(view.locator(".jp-kubelab-Parallel-axis")).to_have_count(2)  # x and loss
    page.screenshot(path=str(ARTIFACTS / "sweep-view.png"))


def test_stop_a_running_experiment_from_its_row(lab_server: JupyterServer, page: Page) -> None:
    response = lab_server.post(
        "experiments", {"name": "sleeper", "command": ["python", "sleep.py"], "resources": {"gpus": 1}}
    )
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    status = row(page, run_id).locator("[data-status]")
    expect(status).to_have_attribute("data-status", "Running", timeout=WAIT_MS)
    expect(sidebar(page).locator('[data-gpu-type="T4"] .jp-kubelab-GpuType-free')).to_have_text("1/2 free")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "sidebar.png"))
    row(page, run_id).locator(".jp-kubelab-Row-menu").click()
    page.locator(".jp-kubelab-RowMenu .lm-Menu-item", has_text="Stop").click()
    expect(status).to_have_attribute("data-status", "Stopped", timeout=WAIT_MS)
    expect(sidebar(page).locator('[data-gpu-type="T4"] .jp-kubelab-GpuType-free')).to_have_text("2/2 free")


def test_filter_with_pql(lab_server: JupyterServer, page: Page) -> None:
    box = sidebar(page).get_by_label("Filter experiments (PQL)")
    rows = sidebar(page).locator(".jp-kubelab-ExperimentsSection .jp-kubelab-Row")
    expect(rows).to_have_count(5)  # train-ok, sleeper and the three trials
    box.fill("status:stopped")
    box.press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.locator(".jp-kubelab-Row-name")).to_have_text("sleeper")
    box.fill("sweep:~nil, metrics.loss:<0.1")
    box.press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.locator(".jp-kubelab-Row-params")).to_have_text("x=0.4")
    box.fill("status:sleeping")
    box.press("Enter")
    error = sidebar(page).locator(".jp-kubelab-Query-error")
    expect(error).to_contain_text("position 8:")
    expect(error.locator("mark")).to_have_text("s")
    expect(rows).to_have_count(1)  # the last good filter still applies
    box.fill("")
    box.press("Enter")
    expect(error).to_have_count(0)
    expect(rows).to_have_count(5)


def test_sort_by_a_column(lab_server: JupyterServer, page: Page) -> None:
    header = sidebar(page).locator('.jp-kubelab-Table-headerCell[data-column="name"]')
    header.click()  # name sorts A→Z first
    names = sidebar(page).locator(".jp-kubelab-ExperimentsSection .jp-kubelab-Row-name")
    expect(header).to_have_attribute("aria-sort", "ascending")
    shown = [text.split(" #")[0] for text in names.all_inner_texts()]  # trials show "name #n"
    assert shown == sorted(shown, key=str.lower) and len(set(shown)) > 1
    header.click()
    expect(header).to_have_attribute("aria-sort", "descending")
    again = [text.split(" #")[0] for text in names.all_inner_texts()]
    assert again == sorted(shown, key=str.lower, reverse=True)


def test_tensorboard_opens_in_a_tab_and_renders(lab_server: JupyterServer, page: Page) -> None:
    run_id = lab_server.get("experiments", params={"query": "name:train-ok"}).json()["items"][0]["id"]
    row(page, run_id).locator(".jp-kubelab-Row-menu").click()
    page.locator(".jp-kubelab-RowMenu .lm-Menu-item", has_text="Open TensorBoard").click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="TensorBoard")
    expect(tab).to_be_visible(timeout=WAIT_MS)
    frame = page.frame_locator(".jp-kubelab-TensorBoardFrame iframe")
    # TensorBoard's own web app (its Angular root) loads inside the frame.
    expect(frame.locator("tb-webapp")).to_be_attached(timeout=WAIT_MS)
    expect(frame.locator("body")).to_contain_text("TensorBoard", timeout=WAIT_MS)
    session = sidebar(page).locator(".jp-kubelab-TensorBoard")
    expect(session).to_have_count(1)
    expect(session).to_have_attribute("data-state", "running", timeout=WAIT_MS)
    page.screenshot(path=str(ARTIFACTS / "tensorboard.png"))
    session.locator(".jp-kubelab-TensorBoard-stop").click()
    expect(session).to_have_attribute("data-state", "stopped", timeout=WAIT_MS)


def test_dark_theme_panel_follows_it(lab_server: JupyterServer, page: Page) -> None:
    run_command_from_palette(page, "Use Theme: JupyterLab Dark")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false", timeout=WAIT_MS)
    time.sleep(0.5)  # the theme's stylesheet swaps in after the attribute
    background = (
        sidebar(page)
        .locator(".jp-kubelab-Experiments")
        .evaluate("node => getComputedStyle(node.closest('.jp-kubelab-Sidebar')).backgroundColor")
    )
    assert luminance(background) < 0.5, background
    page.screenshot(path=str(ARTIFACTS / "sidebar-dark.png"))
    run_command_from_palette(page, "Use Theme: JupyterLab Light")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "true", timeout=WAIT_MS)
    assert page.problems == []  # type: ignore[attr-defined]


def luminance(css_color: str) -> float:
    """Relative brightness (0 to 1) of a computed `rgb(...)`/`rgba(...)` colour."""
    red, green, blue = (int(part) for part in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
