"""The sweep view, the charts, the keyboard and the logs in a real JupyterLab, driven the
way a user drives them: start a sweep from a file's context menu (the dialog recovering
from the server's errors), read every trial's curves with the pruned ones marked, brush
the parallel coordinates to filter the trials table, sort it from the keyboard, stop and
resume a sweep, walk the experiments table with the arrow keys, and search, unwrap and
download a run's log.

The tests share one server and one page and run in file order.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer
from playwright.sync_api import Locator, Page, expect
from test_no_dead_ends import contrast
from test_sidebar import ARTIFACTS, WAIT_MS, file_context_menu, open_panel, run_command_from_palette, sidebar

TRIAL = """\
import kubelab
p = kubelab.params({"bs": 32, "lr": 0.1})
for step in range(5):
    kubelab.report(step=step, loss=p["lr"] * 100 / p["bs"] / (step + 1))
"""
CURVE = """\
import time, kubelab
scale = 10.0 if kubelab.params()["quality"] == "bad" else 1.0
for step in range(8):
    kubelab.report(step=step, loss=scale / (step + 1))
    time.sleep(0.12)
"""
REPLICAS = """\
import os, kubelab
rank = os.environ["KUBELAB_REPLICA"]
for step in range(4):
    print(f"rank {rank} epoch {step} loss {1 / (step + 1):.3f}", flush=True)
    if rank == "0":
        kubelab.report(step=step, loss=1 / (step + 1))
if rank == "0":
    kubelab.report_final(0.25)
"""
GOOD_SPACE = "bs:\n  _type: choice\n  _value: [32, 64]\nlr:\n  _type: choice\n  _value: [0.1, 0.01]\n"


def sweep_view(page: Page) -> Locator:
    return page.locator(".jp-kubelab-SweepView:visible .jp-kubelab-Detail[data-sweep-id]")


def trial_rows(view: Locator) -> Locator:
    return view.locator(".jp-kubelab-Trials tbody tr")


def focused(page: Page, script: str) -> Any:
    return page.evaluate(f"() => {{ const n = document.activeElement; return {script}; }}")


def test_start_a_sweep_from_the_dialog_after_fixing_its_errors(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "sweep_train.py").write_text(TRIAL)
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    expect(page.locator(".jp-Launcher")).to_be_visible(timeout=WAIT_MS)
    file_context_menu(page, "sweep_train.py", "Run as sweep…")
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator('input[name="name"]')).to_be_focused()
    expect(dialog.locator('input[name="command"]')).to_have_value("python sweep_train.py")
    dialog.locator('input[name="name"]').fill("ui-grid")
    dialog.locator('textarea[name="space"]').fill("bs:\n  _type: chooce\n  _value: [32, 64]\n")
    dialog.locator('select[name="tuner"]').select_option("grid")
    dialog.locator('input[name="maxTrials"]').fill("lots")
    start = dialog.get_by_role("button", name="Start sweep")
    start.click()

    # The server's reasons come back next to their fields, the values kept, Start disabled.
    space_error = dialog.locator('[data-field="space"] .jp-kubelab-Field-error')
    expect(space_error).to_contain_text("space.bs", timeout=WAIT_MS)
    expect(space_error).to_contain_text("chooce")
    expect(dialog.locator('[data-field="maxTrials"] .jp-kubelab-Field-error')).to_contain_text("max_trials")
    expect(dialog.locator('input[name="name"]')).to_have_value("ui-grid")
    expect(start).to_be_disabled()
    assert lab_server.get("sweeps").json()["items"] == []  # nothing started

    # YAML that does not parse is named by its line; fixing every field enables Start.
    dialog.locator('input[name="maxTrials"]').fill("4")
    expect(start).to_be_disabled()  # the space is still refused
    dialog.locator('textarea[name="space"]').fill("bs: [unclosed\n")
    expect(start).to_be_enabled()
    start.click()
    expect(space_error).to_contain_text("not valid YAML", timeout=WAIT_MS)
    dialog.locator('textarea[name="space"]').fill(GOOD_SPACE)
    expect(start).to_be_enabled()
    # One scrollbar at most: the space grows with its text, the dialog with the window.
    for scroller in ('textarea[name="space"]', ".jp-Dialog-body"):
        overflow = dialog.locator(scroller).evaluate("node => node.scrollHeight - node.clientHeight")
        assert overflow <= 1, (scroller, overflow)
    page.screenshot(path=str(ARTIFACTS / "sweep-dialog.png"))
    start.click()
    expect(dialog).to_have_count(0, timeout=WAIT_MS)

    # The new sweep's view opens and fills in as trials finish.
    view = sweep_view(page)
    expect(view.locator("h1")).to_have_text("ui-grid", timeout=WAIT_MS)
    expect(view.locator(".jp-kubelab-Detail-status")).to_have_attribute(
        "data-status", "Succeeded", timeout=WAIT_MS
    )
    expect(trial_rows(view)).to_have_count(4, timeout=WAIT_MS)
    # `choice` parameters get category axes, numbers included, in the space's order.
    for name in ("bs", "lr"):
        axis = view.locator(f'.jp-kubelab-Parallel-axis[data-axis="{name}"]')
        expect(axis).to_have_attribute("data-kind", "category")
    expect(view.locator('.jp-kubelab-Parallel-axis[data-axis="bs"] .jp-kubelab-Parallel-tick')).to_have_text(
        ["32", "64"]
    )
    # Every trial's intermediate results overlaid in one chart per metric.
    curves = view.locator('.jp-kubelab-SweepCurves .jp-kubelab-Overlay[data-metric="loss"]')
    expect(curves.locator("canvas")).to_have_count(1, timeout=WAIT_MS)
    expect(curves.locator(".u-legend .u-series")).to_have_count(5)  # step and four trials
    # Each parameter against the objective: a scatter with a dot per finished trial.
    for name in ("bs", "lr"):
        scatter = view.locator(f'.jp-kubelab-ParamScatter[data-param="{name}"]')
        expect(scatter).to_have_attribute("data-points", "4")
        expect(scatter.locator("canvas")).to_have_count(1)
        expect(scatter.locator(".jp-kubelab-Overlay-title")).to_contain_text(f"loss against {name}")
    # Parameter importance as the server computes it, the most important first.
    sweep_id = view.get_attribute("data-sweep-id")
    scores = lab_server.get(f"sweeps/{sweep_id}").json()["importance"]
    assert set(scores) == {"bs", "lr"}, scores
    ranked = sorted(scores, key=lambda name: (-scores[name], name))
    expect(view.locator(".jp-kubelab-Importance tr")).to_have_count(2)
    assert (
        view.locator(".jp-kubelab-Importance tr").evaluate_all("rows => rows.map(r => r.dataset.param)")
        == ranked
    )


def test_brushing_the_parallel_coordinates_filters_the_trials(lab_server: JupyterServer, page: Page) -> None:
    view = sweep_view(page)
    lr = view.locator('.jp-kubelab-Parallel-axis[data-axis="lr"]')
    box = lr.bounding_box()
    assert box is not None
    x = box["x"] + box["width"] / 2
    # lr is [0.1, 0.01]: 0.1 at the bottom, 0.01 at the top. Brush the top half.
    page.mouse.move(x, box["y"] + 1)
    page.mouse.down()
    page.mouse.move(x, box["y"] + box["height"] * 0.4, steps=4)
    page.mouse.up()
    expect(lr.locator(".jp-kubelab-Parallel-brush")).to_have_count(1)
    expect(trial_rows(view)).to_have_count(2)
    expect(view.locator("[data-trials-shown]")).to_contain_text("2 of 4")
    for row in trial_rows(view).all():
        expect(row.locator("td").nth(4)).to_have_text("0.01")
    # Every panel follows the brush: the curves, and the trials Compare opens with.
    curves = view.locator('.jp-kubelab-SweepCurves .jp-kubelab-Overlay[data-metric="loss"]')
    expect(curves.locator(".u-legend .u-series")).to_have_count(3)  # step and two trials
    expect(view.locator('.jp-kubelab-ParamScatter[data-param="bs"]')).to_have_attribute("data-points", "2")
    page.screenshot(path=str(ARTIFACTS / "sweep-view-brushed.png"))
    view.get_by_role("button", name="Compare trials").click()
    compare = page.locator(".jp-kubelab-Compare:visible")
    expect(compare.locator("[data-compare-count]")).to_have_text("2 runs compared", timeout=WAIT_MS)
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs").locator(
        ".lm-TabBar-tabCloseIcon"
    ).click()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Sweep ui-grid").click()
    view.get_by_role("button", name="Clear filters").click()
    expect(trial_rows(view)).to_have_count(4)
    expect(curves.locator(".u-legend .u-series")).to_have_count(5)


def test_the_trials_table_sorts_and_opens_from_the_keyboard(lab_server: JupyterServer, page: Page) -> None:
    view = sweep_view(page)
    table = view.locator(".jp-kubelab-Trials")
    expect(table).to_have_attribute("role", "grid")
    # The table is one tab stop: its first cell (a click would open the trial).
    stop = table.locator('[tabindex="0"]')
    expect(stop).to_have_count(1)
    stop.focus()
    assert focused(page, "n.closest('tr').getAttribute('aria-rowindex')") == "2"
    page.keyboard.press("ArrowUp")  # to the header row
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")  # the objective's header
    assert focused(page, "n.dataset.column") == "objective"
    page.keyboard.press("Enter")
    header = table.locator('th[data-column="objective"]')
    expect(header).to_have_attribute("aria-sort", "ascending")
    values = [float(v.rstrip(" †")) for v in trial_rows(view).locator("td:nth-child(3)").all_inner_texts()]
    assert values == sorted(values), values
    page.keyboard.press(" ")
    expect(header).to_have_attribute("aria-sort", "descending")
    values = [float(v.rstrip(" †")) for v in trial_rows(view).locator("td:nth-child(3)").all_inner_texts()]
    assert values == sorted(values, reverse=True), values

    # Down to the second trial, Enter opens it: a tab titled with its number that links back.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert focused(page, "n.closest('tr').getAttribute('aria-rowindex')") == "3"
    number = trial_rows(view).nth(1).get_attribute("data-trial")
    page.keyboard.press("Enter")
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")
    expect(tab).to_contain_text(f"Trial #{number} · ui-grid", timeout=WAIT_MS)
    trial_view = page.locator(".jp-kubelab-ExperimentView:visible .jp-kubelab-Detail")
    link = trial_view.locator(".jp-kubelab-Detail-sweep")
    expect(link).to_contain_text(f"Trial #{number} of ui-grid")
    link.get_by_role("button", name="ui-grid").click()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(
        "Sweep ui-grid"
    )


def test_pruned_trials_are_marked(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "curve.py").write_text(CURVE)
    batch = [{"quality": q} for q in ("good", "good", "good", "bad")]
    response = lab_server.post(
        "sweeps",
        {
            "name": "ui-pruned",
            "tuner": "batch",
            "batch": batch,
            "concurrency": 1,
            "objective": {"metric": "loss"},
            "early_stopping": {"name": "median", "args": {"n_startup_trials": 2, "n_warmup_steps": 1}},
            "trial": {"command": ["python", "curve.py"]},
        },
    )
    assert response.status_code == 201, response.text
    sweep_id = response.json()["id"]
    open_panel(page)
    item = sidebar(page).locator(f'.jp-kubelab-Sweep[data-sweep-id="{sweep_id}"]')
    expect(item).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    rows = {t["trial"]: t for t in lab_server.get(f"sweeps/{sweep_id}").json()["trials"]}
    assert rows[3]["result"] == "pruned", rows
    item.click()
    view = page.locator(f'.jp-kubelab-Detail[data-sweep-id="{sweep_id}"]')
    pruned_row = view.locator('.jp-kubelab-Trials tbody tr[data-trial="3"]')
    expect(pruned_row).to_have_class(re.compile(r"\bjp-kubelab-Trials-pruned\b"), timeout=WAIT_MS)
    status = pruned_row.locator("td").nth(1)
    expect(status).to_have_text(re.compile(r"^(Pruned|\w+ \(pruned\))$"))  # never "Pruned (pruned)"
    last = pruned_row.locator("td[data-last]")  # no result: its last reported value, marked
    expect(last).to_have_text(re.compile(r"^-?\d[\d.e-]*†$"))
    curves = view.locator('.jp-kubelab-SweepCurves .jp-kubelab-Overlay[data-metric="loss"]')
    expect(curves.locator(".u-legend")).to_contain_text("#3 (pruned)")
    expect(view.locator(".jp-kubelab-SweepCurves h2")).to_contain_text("1 pruned, dashed")
    # `quality` is a string parameter: a category axis of its two values.
    axis = view.locator('.jp-kubelab-Parallel-axis[data-axis="quality"]')
    expect(axis).to_have_attribute("data-kind", "category")


def test_stop_and_resume_a_sweep_from_its_view(lab_server: JupyterServer, page: Page) -> None:
    gate = lab_server.root / "go"
    script = (
        f"import os, time, kubelab\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
        "kubelab.report(loss=1)\n"
    )
    (lab_server.root / "gated.py").write_text(script)
    response = lab_server.post(
        "sweeps",
        {
            "name": "ui-gated",
            "space": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "objective": {"metric": "loss"},
            "tuner": "random",
            "max_trials": 2,
            "concurrency": 1,
            "trial": {"command": ["python", "gated.py"]},
        },
    )
    assert response.status_code == 201, response.text
    sweep_id = response.json()["id"]
    item = sidebar(page).locator(f'.jp-kubelab-Sweep[data-sweep-id="{sweep_id}"]')
    item.click()
    view = page.locator(f'.jp-kubelab-Detail[data-sweep-id="{sweep_id}"]')
    status = view.locator(".jp-kubelab-Detail-status")
    expect(status).to_have_attribute("data-status", "Running", timeout=WAIT_MS)
    deadline = time.monotonic() + WAIT_MS / 1000
    while lab_server.get(f"sweeps/{sweep_id}").json()["counts"]["running"] == 0:  # a trial to interrupt
        assert time.monotonic() < deadline, "the sweep's first trial never started"
        time.sleep(0.05)
    view.get_by_role("button", name="Stop", exact=True).click()
    expect(status).to_have_attribute("data-status", "Stopped", timeout=WAIT_MS)
    assert lab_server.get(f"sweeps/{sweep_id}").json()["counts"]["interrupted"] == 1
    interrupted = item.locator(".jp-kubelab-Sweep-interrupted")
    expect(interrupted).to_have_text("1 trial interrupted", timeout=WAIT_MS)  # the sidebar says so
    view.get_by_role("button", name="Resume…").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator("input").fill("3")
    dialog.get_by_role("button", name="Resume").click()
    expect(status).to_have_attribute("data-status", "Running", timeout=WAIT_MS)
    gate.write_text("")
    expect(status).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    record = lab_server.get(f"sweeps/{sweep_id}").json()
    counts = record["counts"]
    assert record["max_trials"] == 3 and counts["succeeded"] + counts["stopped"] == 3, record
    expect(interrupted).to_have_count(0 if counts["interrupted"] == 0 else 1)


def test_the_experiments_table_is_a_keyboard_grid(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "replicas.py").write_text(REPLICAS)
    response = lab_server.post(
        "experiments",
        {"name": "two-replicas", "command": ["python", "replicas.py"], "replicas": 2, "framework": "pytorch"},
    )
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    lab_server.wait_for(run_id)
    open_panel(page)  # narrow, as it opens: the table scrolls sideways
    table = sidebar(page).locator(".jp-kubelab-ExperimentsSection .jp-kubelab-Table")
    expect(table).to_have_attribute("role", "grid")
    first = table.locator('.jp-kubelab-Row[aria-rowindex="2"]')
    expect(first).to_have_attribute("data-experiment-id", run_id, timeout=WAIT_MS)  # newest first
    # Tab into the grid lands on one cell (a roving tab stop), arrows move between cells.
    stop = table.locator('[tabindex="0"]')
    expect(stop).to_have_count(1)
    stop.focus()
    assert focused(page, "n.closest('[role=row]').getAttribute('aria-rowindex')") == "2"
    page.keyboard.press("ArrowDown")
    assert focused(page, "n.closest('[role=row]').getAttribute('aria-rowindex')") == "3"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")  # the header row: Enter sorts by the column
    header = table.locator('[role="columnheader"][data-column="name"]')
    assert focused(page, "n.dataset.column") == "name"
    page.keyboard.press("Enter")
    expect(header).to_have_attribute("aria-sort", re.compile("ascending|descending"))
    before = table.locator('[role="columnheader"][data-column="name"]').get_attribute("aria-sort")
    page.keyboard.press("Enter")
    expect(header).not_to_have_attribute("aria-sort", before or "")
    # End reaches the row's menu button without scrolling the table sideways; Enter opens
    # the menu with its first item active.
    page.keyboard.press("ArrowDown")
    left = table.evaluate("n => n.scrollLeft")
    page.keyboard.press("End")
    assert focused(page, "n.classList.contains('jp-kubelab-Row-menu')") is True
    assert table.evaluate("n => n.scrollLeft") == left
    page.keyboard.press("Enter")
    first_item = page.locator(".jp-kubelab-RowMenu .lm-Menu-item").first
    expect(first_item).to_have_class(re.compile(r"\blm-mod-active\b"))
    page.keyboard.press("Escape")
    expect(page.locator(".jp-kubelab-RowMenu")).to_have_count(0)
    # Enter on a row opens its view.
    cell = table.locator('.jp-kubelab-Row[aria-rowindex="3"] [role="gridcell"]').first
    name = cell.inner_text().split(" #")[0]
    cell.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(name)


def test_logs_search_wrap_download_and_replica_tabs(lab_server: JupyterServer, page: Page) -> None:
    run_id = next(
        r["id"] for r in lab_server.get("experiments").json()["items"] if r["name"] == "two-replicas"
    )
    row = sidebar(page).locator(f'.jp-kubelab-Row[data-experiment-id="{run_id}"]')
    row.locator(".jp-kubelab-Row-name").click()
    view = page.locator(f'.jp-kubelab-Detail[data-experiment-id="{run_id}"]')
    # The metric chart is the shared uPlot chart; the final value is a value.
    expect(view.locator('.jp-kubelab-Overlay[data-metric="loss"] canvas')).to_have_count(1, timeout=WAIT_MS)
    expect(view.locator('.jp-kubelab-FinalValues tr[data-metric="default"] td')).to_have_text("0.25")
    view.locator('input[name="log"]').check()
    expect(view.locator('.jp-kubelab-Overlay[data-metric="loss"] canvas')).to_have_count(1)

    logs = view.locator(".jp-kubelab-Logs")
    text = logs.locator(".jp-kubelab-Logs-text")
    expect(text).to_contain_text("rank 0 epoch 3", timeout=WAIT_MS)
    search = logs.get_by_role("searchbox", name="Search the log")
    search.fill("EPOCH")
    expect(text.locator("mark")).to_have_count(4)
    count = logs.locator(".jp-kubelab-Logs-count")
    expect(count).to_have_text("1 of 4")
    search.press("Enter")
    expect(count).to_have_text("2 of 4")
    expect(text.locator("mark.jp-mod-active")).to_have_text("epoch")
    search.press("Shift+Enter")
    search.press("Shift+Enter")
    expect(count).to_have_text("4 of 4")
    logs.get_by_role("button", name="Next match").click()
    expect(count).to_have_text("1 of 4")
    search.fill("nothing like this")
    expect(count).to_have_text("no match")
    search.fill("")

    assert text.evaluate("n => getComputedStyle(n).whiteSpace") == "pre-wrap"
    logs.get_by_label("Wrap lines").uncheck()
    assert text.evaluate("n => getComputedStyle(n).whiteSpace") == "pre"

    with page.expect_download() as download:
        logs.get_by_role("button", name="Download").click()
    saved = download.value.path()
    assert saved is not None
    content = Path(saved).read_text(encoding="utf-8")
    assert "rank 0 epoch 0" in content and "rank 0 epoch 3" in content
    assert download.value.suggested_filename.endswith("replica0.log")

    tabs = logs.get_by_role("tab")
    expect(tabs).to_have_count(2)
    first, second = tabs.nth(0), tabs.nth(1)
    expect(first).to_have_attribute("aria-selected", "true")
    style = "n => getComputedStyle(n).borderBottomColor"
    idle = second.evaluate(style)
    second.click()
    expect(second).to_have_attribute("aria-selected", "true")
    expect(first).to_have_attribute("aria-selected", "false")
    assert second.evaluate(style) != idle  # visibly marked, not only for screen readers
    expect(text).to_contain_text("rank 1 epoch 0", timeout=WAIT_MS)


def test_log_matches_read_in_both_themes(lab_server: JupyterServer, page: Page) -> None:
    logs = page.locator(".jp-kubelab-ExperimentView:visible .jp-kubelab-Logs")
    logs.get_by_role("searchbox", name="Search the log").fill("epoch")
    current, other = logs.locator("mark.jp-mod-active"), logs.locator("mark:not(.jp-mod-active)").first
    expect(current).to_have_count(1)
    read = "n => [getComputedStyle(n).color, getComputedStyle(n).backgroundColor]"
    ratios = {}
    for theme, light in (("JupyterLab Dark", "false"), ("JupyterLab Light", "true")):
        run_command_from_palette(page, f"Use Theme: {theme}")
        expect(page.locator("body")).to_have_attribute("data-jp-theme-light", light, timeout=WAIT_MS)
        time.sleep(0.5)  # the theme's stylesheet swaps in after the attribute
        ratios[theme] = (contrast(*current.evaluate(read)), contrast(*other.evaluate(read)))
        if light == "false":
            page.screenshot(path=str(ARTIFACTS / "logs-dark.png"))
    assert all(ratio >= 4.5 for pair in ratios.values() for ratio in pair), ratios  # WCAG AA


def test_text_is_no_smaller_than_jupyterlabs_in_the_views(lab_server: JupyterServer, page: Page) -> None:
    smallest_text = """root => {
        const base = parseFloat(getComputedStyle(document.body)
            .getPropertyValue('--jp-ui-font-size1'));
        const sizes = [...root.querySelectorAll('*')]
            .filter(n => [...n.childNodes].some(c => c.nodeType === 3 && c.textContent.trim()))
            .map(n => [parseFloat(getComputedStyle(n).fontSize), n.className]);
        sizes.sort((a, b) => a[0] - b[0]);
        return [sizes[0][0], base, sizes[0][1]];
    }"""
    experiment = page.locator(".jp-kubelab-ExperimentView:visible")
    smallest = experiment.evaluate(smallest_text)
    assert smallest[0] >= smallest[1], smallest  # (size, JupyterLab's, the element's class)
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Sweep ui-grid").click()
    sweep = page.locator(".jp-kubelab-SweepView:visible")
    expect(sweep.locator(".jp-kubelab-Parallel-tick").first).to_be_visible()
    smallest = sweep.evaluate(smallest_text)
    assert smallest[0] >= smallest[1], smallest


def test_column_order_comes_from_the_settings(lab_server: JupyterServer, page: Page) -> None:
    # What the Settings Editor saves (its JSON view) for kubelab's `columns`.
    settings = {"raw": json.dumps({"columns": ["name", "metric", "status"]})}
    response = requests.put(
        f"{lab_server.url}lab/api/settings/kubelab:plugin",
        headers=lab_server.headers,
        json=settings,
        timeout=30,
    )
    assert response.status_code == 204, response.text
    page.reload()
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    headers = sidebar(page).locator(".jp-kubelab-ExperimentsSection [role='columnheader'][data-column]")
    expect(headers).to_have_count(3, timeout=WAIT_MS)
    assert [h.get_attribute("data-column") for h in headers.all()] == ["name", "metric", "status"]


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
