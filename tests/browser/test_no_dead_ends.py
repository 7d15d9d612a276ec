"""The places where a user used to get stuck, driven in Chromium the way a user meets them:
the Run dialog after a validation error and after Cancel, a malformed PQL comparison,
TensorBoard with the metrics a run reported (and its tab following the session's life),
and the sweep's best row in the dark theme.

The tests share one server and one page and run in file order (each builds on the last).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from browser.conftest import runs_after_submit
from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from test_sidebar import (
    ARTIFACTS,
    TRAIN,
    WAIT_MS,
    file_context_menu,
    finished_grid_sweep,
    open_panel,
    row,
    run_command_from_palette,
    sidebar,
    widen_sidebar,
)


def test_the_run_dialog_recovers_after_an_error_and_keeps_values_on_cancel(
    lab_server: JupyterServer, page: Page
) -> None:
    (lab_server.root / "train.py").write_text(TRAIN)
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    expect(page.locator(".jp-Launcher")).to_be_visible(timeout=WAIT_MS)

    file_context_menu(page, "train.py", "Run as experiment")
    dialog = page.locator(".jp-Dialog")
    run = dialog.get_by_role("button", name="Run")
    dialog.locator('input[name="name"]').fill("fixed-run")
    dialog.locator('input[name="memory"]').fill("lots")
    run.click()
    memory = dialog.locator('.jp-kubelab-Field[data-field="memory"]')
    expect(memory.locator(".jp-kubelab-Field-error")).to_contain_text("is not a Kubernetes quantity")
    # Typing elsewhere leaves the refused memory in place: JupyterLab keeps Run disabled.
    dialog.locator('input[name="cpu"]').fill("1")
    expect(run).to_be_disabled()
    # Fixing the field takes its reason away and Run works again.
    dialog.locator('input[name="memory"]').fill("1Gi")
    expect(memory.locator(".jp-kubelab-Field-error")).to_have_count(0)
    expect(dialog.locator(".jp-mod-error")).to_have_count(0)
    expect(run).to_be_enabled()

    # Cancel, then open the dialog again for the same file: nothing typed is lost.
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert lab_server.get("experiments").json()["total"] == 0
    file_context_menu(page, "train.py", "Run as experiment")
    expect(dialog.locator('input[name="name"]')).to_have_value("fixed-run")
    expect(dialog.locator('input[name="memory"]')).to_have_value("1Gi")
    expect(dialog.locator('input[name="cpu"]')).to_have_value("1")
    run.click()
    expect(dialog).to_have_count(0, timeout=10_000)
    items = runs_after_submit(lab_server, page)
    assert [item["name"] for item in items] == ["fixed-run"]
    detail = lab_server.get(f"experiments/{items[0]['id']}").json()
    assert detail["spec"]["resources"]["memory"] == "1Gi", detail["spec"]


def test_a_malformed_metric_comparison_is_refused_with_its_reason(
    lab_server: JupyterServer, page: Page
) -> None:
    open_panel(page)
    box = sidebar(page).get_by_label("Filter experiments (PQL)")
    error = sidebar(page).locator(".jp-kubelab-Query-error")
    box.fill("metrics.loss:<<0.5")
    box.press("Enter")
    expect(error).to_contain_text("position 15:")
    expect(error).to_contain_text("'<' cannot be followed by another operator '<'")
    box.fill("metrics.loss:<abc")
    box.press("Enter")
    expect(error).to_contain_text("metrics.loss holds numbers; '<' needs a number, not 'abc'")
    box.fill("")
    box.press("Enter")
    expect(error).to_have_count(0)


def test_tensorboard_shows_reported_metrics_and_its_tab_follows_the_session(
    lab_server: JupyterServer, page: Page
) -> None:
    run_id = lab_server.get("experiments").json()["items"][0]["id"]
    widen_sidebar(page, 420)
    status = row(page, run_id).locator("[data-status]")
    expect(status).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    row(page, run_id).locator(".jp-kubelab-Row-menu").click()
    page.locator(".jp-kubelab-RowMenu .lm-Menu-item", has_text="Open TensorBoard").click()
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="TensorBoard")
    expect(tab).to_be_visible(timeout=WAIT_MS)
    frame = page.frame_locator(".jp-kubelab-TensorBoardFrame iframe")
    # The scalars kubelab.report wrote, in TensorBoard's own dashboard: a card for "loss"
    # and the run kubelab writes them as.
    expect(frame.get_by_text("loss", exact=True).first).to_be_visible(timeout=WAIT_MS)
    expect(frame.locator("body")).to_contain_text("fixed-run/kubelab", timeout=WAIT_MS)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tensorboard-metrics.png"))
    session = sidebar(page).locator(".jp-kubelab-TensorBoard")
    expect(session).to_have_attribute("data-state", "running", timeout=WAIT_MS)

    # Closing the tab stops the session (no TensorBoard left running for the idle timeout).
    tab.locator(".lm-TabBar-tabCloseIcon").click()
    expect(tab).to_have_count(0)
    expect(session).to_have_attribute("data-state", "stopped", timeout=WAIT_MS)
    assert lab_server.get("tensorboards").json()["items"][0]["reason"] == "stopped on request"

    # Open from the sidebar starts it again, visibly; Stop from the sidebar closes the tab.
    session.locator(".jp-kubelab-TensorBoard-open").click()
    expect(tab).to_be_visible(timeout=WAIT_MS)
    expect(session).to_have_attribute("data-state", "running", timeout=WAIT_MS)
    expect(frame.get_by_text("loss", exact=True).first).to_be_visible(timeout=WAIT_MS)
    session.locator(".jp-kubelab-TensorBoard-stop").click()
    expect(session).to_have_attribute("data-state", "stopped", timeout=WAIT_MS)
    expect(tab).to_have_count(0)
    # A page that comes back to the stopped session (a reload) is told so; nothing starts.
    url = lab_server.get("tensorboards").json()["items"][0]["url"]
    reloaded = page.request.get(lab_server.url.rstrip("/") + url)
    assert reloaded.status == 410 and "was stopped" in reloaded.text()
    assert lab_server.get("tensorboards").json()["items"][0]["state"] == "stopped"


TB_CELL = """\
%%train --name nb-tb --tensorboard
import time, kubelab
time.sleep(3)
for step in range(3):
    kubelab.report(step=step, loss=1 / (step + 1))
time.sleep(3)
"""


def test_train_tensorboard_opens_once_the_run_has_reported(lab_server: JupyterServer, page: Page) -> None:
    cells: list[dict[str, Any]] = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}
        for source in ("%load_ext kubelab", TB_CELL)
    ]
    notebook = {
        "cells": cells,
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    }
    (lab_server.root / "tb.ipynb").write_text(json.dumps(notebook))
    page.goto(f"{lab_server.url}lab/tree/tb.ipynb?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    panel = page.locator(".jp-NotebookPanel")
    select = page.locator(".jp-Dialog").get_by_role("button", name="Select")
    try:  # JupyterLab may ask which kernel to start
        select.wait_for(timeout=10_000)
        select.click()
    except PlaywrightTimeoutError:
        pass
    expect(page.get_by_role("button", name=re.compile(r"\| Idle$"))).to_be_visible(timeout=WAIT_MS)
    run_command_from_palette(page, "Run All Cells")
    output = panel.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
    # Before the first report: a note, no empty TensorBoard.
    expect(output.locator("[data-kubelab-tensorboard-pending]")).to_be_visible(timeout=WAIT_MS)
    expect(output.locator("iframe")).to_have_count(0)
    # Then TensorBoard itself, showing the reported loss.
    expect(output.locator("iframe")).to_have_count(1, timeout=WAIT_MS)
    frame = output.frame_locator("iframe")
    expect(frame.get_by_text("loss", exact=True).first).to_be_visible(timeout=WAIT_MS)
    page.screenshot(path=str(ARTIFACTS / "notebook-tensorboard.png"))
    run_command_from_palette(page, "Shut Down All Kernels…")
    confirm = page.locator(".jp-Dialog").get_by_role("button", name="Shut Down All")
    confirm.click()
    expect(page.locator(".jp-Dialog")).to_have_count(0)


def test_a_failed_run_says_why(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "crash.py").write_text(
        "def load(path):\n    raise FileNotFoundError(f'no dataset at {path}')\nload('/data/mnist')\n"
    )
    response = lab_server.post("experiments", {"name": "crash", "command": ["python", "crash.py"]})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    status = row(page, run_id).locator("[data-status]")
    expect(status).to_have_attribute("data-status", "Failed", timeout=WAIT_MS)
    row(page, run_id).locator(".jp-kubelab-Row-name").click()
    view = page.locator(f'.jp-kubelab-Detail[data-experiment-id="{run_id}"]')
    expect(view.locator(".jp-kubelab-Detail-reason")).to_have_text(
        "replica 0 exited with code 1: FileNotFoundError: no dataset at /data/mnist", timeout=WAIT_MS
    )
    expect(view.get_by_role("button", name="Stop")).to_have_count(0)  # finished: nothing to stop
    times = view.locator(".jp-kubelab-Timeline-time").all_inner_texts()
    assert times and all(re.search(r"\d:\d\d:\d\d", t) for t in times), times  # to the second


def test_the_best_trial_reads_in_the_dark_theme(lab_server: JupyterServer, page: Page) -> None:
    sweep_id, item = finished_grid_sweep(lab_server, page, "dark-sweep")
    item.click()
    view = page.locator(f'.jp-kubelab-Detail[data-sweep-id="{sweep_id}"]')
    best = view.locator(".jp-kubelab-Trials-best")
    expect(best).to_be_visible(timeout=WAIT_MS)
    run_command_from_palette(page, "Use Theme: JupyterLab Dark")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false", timeout=WAIT_MS)
    time.sleep(0.5)  # the theme's stylesheet swaps in after the attribute
    page.mouse.move(0, 0)  # no hover colour on the row
    colours = best.locator("td").first.evaluate(
        "cell => [getComputedStyle(cell).color, getComputedStyle(cell.closest('tr')).backgroundColor]"
    )
    ratio = contrast(*colours)
    page.screenshot(path=str(ARTIFACTS / "sweep-view-dark.png"))
    run_command_from_palette(page, "Use Theme: JupyterLab Light")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "true", timeout=WAIT_MS)
    assert ratio >= 4.5, (colours, ratio)  # WCAG AA for body text
    assert page.problems == []  # type: ignore[attr-defined]


def channels(css_color: str) -> tuple[float, float, float]:
    """sRGB channels (0 to 1) of a computed colour: `rgb()`/`rgba()` or `color(srgb …)`,
    which is how Chromium reports a `color-mix()`."""
    numbers = [float(n) for n in re.findall(r"[\d.]+", css_color)]
    if css_color.startswith("color(srgb"):
        return numbers[0], numbers[1], numbers[2]
    return numbers[0] / 255, numbers[1] / 255, numbers[2] / 255


def contrast(foreground: str, background: str) -> float:
    """The WCAG 2 contrast ratio of two opaque colours."""

    def luminance(colour: str) -> float:
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels(colour)]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
