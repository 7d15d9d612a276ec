"""The Experiments sidebar in a real JupyterLab: opened from the command palette, it shows
experiments submitted through the REST API and follows their status live."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from playwright.sync_api import ConsoleMessage, Locator, Page, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = os.environ.get("KUBELAB_CHROMIUM", "/usr/bin/chromium")  # never a downloaded one
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 90_000  # a first JupyterLab load on a busy 2-core machine


@pytest.fixture
def page():
    if not shutil.which(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium, or set KUBELAB_CHROMIUM")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()


def open_sidebar_from_palette(page: Page, sidebar: Locator) -> None:
    """Run `kubelab:open-sidebar` from the command palette.

    The modal palette closes when it loses focus, which JupyterLab may still move while
    it finishes restoring the layout; so a closed palette is reopened a few times.
    """
    palette = page.locator("#modal-command-palette")
    for _ in range(5):
        page.keyboard.press("Control+Shift+C")
        try:
            expect(palette).to_be_visible(timeout=5_000)
            palette.locator("input").fill("Open the Experiments sidebar", timeout=5_000)
            item = palette.locator(".lm-CommandPalette-item", has_text="Experiments sidebar")
            expect(item).to_have_count(1, timeout=5_000)
            page.keyboard.press("Enter")
            expect(sidebar).to_be_visible(timeout=5_000)
            return
        except (AssertionError, PlaywrightTimeoutError):
            page.keyboard.press("Escape")
    raise AssertionError("could not run 'Open the Experiments sidebar' from the palette")


THEMES = {"JupyterLab Light": ("sidebar.png", "true"), "JupyterLab Dark": ("sidebar-dark.png", "false")}


@pytest.mark.parametrize("lab_theme", list(THEMES))
def test_sidebar_shows_experiments_with_live_status(lab_server, lab_theme: str, page: Page) -> None:
    problems: list[str] = []

    def watch(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning") and "kubelab" in message.text:
            problems.append(message.text)

    page.on("console", watch)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jp-main-dock-panel")).to_be_visible(timeout=WAIT_MS)
    # The splash screen goes once every plugin (ours included) has activated and the
    # layout is restored; before that, key bindings may not be listening yet.
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    expect(page.get_by_role("tab", name="Experiments")).to_be_visible()

    sidebar = page.locator('[id="kubelab:sidebar"]')
    expect(page.locator(".jp-Launcher")).to_be_visible(timeout=WAIT_MS)
    expect(sidebar).to_be_hidden()
    open_sidebar_from_palette(page, sidebar)
    expect(sidebar.locator("[data-stream-state]")).to_have_attribute(
        "data-stream-state", "live", timeout=WAIT_MS
    )
    expect(sidebar.locator(".jp-kubelab-Sidebar-resources")).to_have_text(
        "Backend: local · 2 of 2 GPUs free (T4 ×2)"
    )
    expect(sidebar.locator(".jp-kubelab-Sidebar-empty")).to_be_visible()

    # Submitted after the panel is open, so only the event stream can bring them in.
    report = "import kubelab; kubelab.report(step=3, loss=0.25)"
    good = lab_server.post(
        "experiments",
        {"name": "browser-ok", "command": [sys.executable, "-c", report], "resources": {"gpus": 0}},
    )
    assert good.status_code == 201, good.text
    bad = lab_server.post(
        "experiments",
        {"name": "browser-fails", "command": [sys.executable, "-c", "raise SystemExit(3)"]},
    )
    assert bad.status_code == 201, bad.text
    good_id, bad_id = good.json()["id"], bad.json()["id"]

    good_row = sidebar.locator(f'tr[data-experiment-id="{good_id}"]')
    bad_row = sidebar.locator(f'tr[data-experiment-id="{bad_id}"]')
    expect(good_row.locator(".jp-kubelab-Row-name")).to_have_text("browser-ok")
    expect(good_row.locator("[data-status]")).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    expect(good_row.locator(".jp-kubelab-Row-metric")).to_have_text("loss 0.25 @3")
    expect(good_row.locator(".jp-kubelab-StatusDot-succeeded")).to_be_visible()
    expect(bad_row.locator("[data-status]")).to_have_attribute("data-status", "Failed", timeout=WAIT_MS)
    expect(bad_row.locator("[data-status]")).to_have_attribute("title", re.compile(r"\(exit code 3\)$"))
    # Newest first: the failing run was submitted second.
    ids = sidebar.locator("tr[data-experiment-id]").evaluate_all(
        "rows => rows.map(row => row.dataset.experimentId)"
    )
    assert ids == [bad_id, good_id]

    # The panel takes its colours from the theme: dark text on light, light on dark.
    screenshot, light = THEMES[lab_theme]
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", light)
    background = sidebar.evaluate("node => getComputedStyle(node).backgroundColor")
    assert (luminance(background) > 0.5) == (light == "true"), background

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / screenshot))

    # Deleting through the API removes the row live as well.
    assert lab_server.delete(f"experiments/{bad_id}").status_code in (200, 204)
    expect(bad_row).to_have_count(0, timeout=WAIT_MS)
    assert problems == []


def luminance(css_color: str) -> float:
    """Relative brightness (0 to 1) of a computed `rgb(...)`/`rgba(...)` colour."""
    red, green, blue = (int(part) for part in re.findall(r"\d+", css_color)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255
