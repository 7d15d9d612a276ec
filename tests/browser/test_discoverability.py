"""Where a new user finds kubelab without reading docs: the Run menu, the sidebar's toolbar,
the Python editor's toolbar, a notebook's parameters in the dialog, and an empty sweeps
section that says how to start one.
"""

from __future__ import annotations

import json

import pytest
from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect
from test_sidebar import WAIT_MS, file_context_menu, open_panel, sidebar

NOTEBOOK = {
    "cells": [
        {
            "cell_type": "code",
            "metadata": {"tags": ["parameters"]},
            "outputs": [],
            "execution_count": None,
            "source": "lr = 0.01  # learning rate\noptimizer = 'adam'\n",
        },
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "print(lr, optimizer)",
        },
    ],
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
}


def test_the_run_menu_and_the_sidebar_toolbar(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "train.py").write_text("print('hi')\n")
    (lab_server.root / "sweepme.ipynb").write_text(json.dumps(NOTEBOOK))
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    menu = page.locator(".lm-Menu").last
    for label in (
        "Run as experiment",
        "Compare runs",
        "Open TensorBoard for all experiments",
        "Refresh experiments",
    ):
        expect(menu.locator(".lm-Menu-itemLabel", has_text=label)).to_be_visible()
    page.keyboard.press("Escape")

    open_panel(page)
    empty = sidebar(page).locator(".jp-kubelab-SweepsSection .jp-kubelab-Sidebar-empty")
    expect(empty).to_contain_text("%%train --sweep space.json")
    toolbar = sidebar(page).locator(".jp-Toolbar")
    expect(toolbar.get_by_role("button", name="Run")).to_be_visible()
    expect(toolbar.get_by_role("button", name="Compare")).to_be_visible()


def test_run_from_the_python_editor_toolbar(lab_server: JupyterServer, page: Page) -> None:
    page.goto(f"{lab_server.url}lab/tree/train.py?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    editor = page.locator(".jp-FileEditor").first
    expect(editor).to_be_visible(timeout=WAIT_MS)
    button = page.locator('.jp-MainAreaWidget .jp-Toolbar [data-jp-item-name="kubelab-run"]')
    expect(button).to_be_visible(timeout=WAIT_MS)
    button.locator("button").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator(".jp-kubelab-RunForm-subject")).to_have_text("train.py")
    expect(dialog.locator('input[name="name"]')).to_have_value("train")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)


def test_a_notebooks_parameters_cell_prefills_the_dialog(lab_server: JupyterServer, page: Page) -> None:
    file_context_menu(page, "sweepme.ipynb", "Run as experiment")
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator('textarea[name="params"]')).to_have_value('lr=0.01\noptimizer="adam"')
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    assert page.problems == []  # type: ignore[attr-defined]


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
