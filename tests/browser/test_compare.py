"""Compare runs in a real JupyterLab: tick three runs and read their loss curves overlaid
(hover values, smoothing, log scale, time axis, zoom and reset), final values as values,
the run table's metric and parameter columns, and a sweep's trials grouped under it.
"""

from __future__ import annotations

import re
import sys

import pytest
from jupyter_server_process import JupyterServer
from playwright.sync_api import Locator, Page, expect
from test_sidebar import ARTIFACTS, WAIT_MS, open_panel, sidebar

TRAIN = """\
import kubelab
lr = kubelab.params({"lr": 0.1})["lr"]
for step in range(6):
    kubelab.report(step=step, loss=lr * 10 / (step + 1))
kubelab.report_final(lr * 2)
"""
SWEEP_TRIAL = "import kubelab; kubelab.report(loss=(kubelab.params()['x'] - 0.5) ** 2)"
RUNS = {"cmp-a": 0.1, "cmp-b": 0.2, "cmp-c": 0.4}


def legend_values(chart: Locator) -> list[str]:
    """The hover values uPlot's legend shows for each run (the x value comes first)."""
    return chart.locator(".u-legend .u-series .u-value").all_inner_texts()


def hover(page: Page, chart: Locator, fraction: float) -> None:
    box = chart.locator(".u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)


def test_compare_three_runs(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "train.py").write_text(TRAIN)
    ids = {}
    for name, lr in RUNS.items():
        response = lab_server.post(
            "experiments", {"name": name, "command": ["python", "train.py"], "params": {"lr": lr}}
        )
        assert response.status_code == 201, response.text
        ids[name] = response.json()["id"]
    spec = {
        "name": "cmp-sweep",
        "space": {"x": {"_type": "choice", "_value": [0.0, 0.4, 0.9]}},
        "objective": {"metric": "loss"},
        "tuner": "grid",
        "concurrency": 2,
        "trial": {"command": [sys.executable, "-c", SWEEP_TRIAL]},
    }
    assert lab_server.post("sweeps", spec).status_code == 201

    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    rows = sidebar(page).locator(".jp-kubelab-ExperimentsSection .jp-kubelab-Row [data-status='Succeeded']")
    expect(rows).to_have_count(6, timeout=WAIT_MS)
    sidebar(page).get_by_role("button", name="Compare").click()
    view = page.locator(".jp-kubelab-Compare")
    expect(view).to_be_visible()

    # The run table: a column per metric and parameter, the sweep's trials grouped.
    table = view.locator(".jp-kubelab-RunTable")
    expect(table.locator('th[data-column="param:lr"]')).to_be_visible()
    expect(table.locator('th[data-column="metric:loss"]')).to_be_visible()
    group = table.locator(".jp-kubelab-RunTable-group[data-sweep-id]")
    trials = table.locator(".jp-kubelab-RunTable-row[data-sweep-id]")
    expect(group.locator(".jp-kubelab-RunTable-toggle")).to_have_text("▾ Sweep cmp-sweep (3 trials)")
    expect(trials).to_have_count(3)
    group.locator(".jp-kubelab-RunTable-toggle").click()
    expect(trials).to_have_count(0)
    name_cell = table.locator(".jp-kubelab-RunTable-name").first
    assert name_cell.evaluate("node => getComputedStyle(node).position") == "sticky"

    for name in RUNS:
        view.get_by_role("checkbox", name=f"Compare {name}").check()
    expect(view.locator("[data-compare-count]")).to_have_text("3 runs compared")
    chart = view.locator('.jp-kubelab-Overlay[data-metric="loss"]')
    expect(chart.locator("canvas")).to_have_count(1, timeout=WAIT_MS)
    expect(chart.locator(".u-legend .u-series")).to_have_count(4)  # the x axis and three runs
    expect(chart.locator(".u-legend")).to_contain_text("cmp-a")
    # A final-only metric is a value, not a one-point chart.
    expect(view.locator('.jp-kubelab-Overlay[data-metric="default"]')).to_have_count(0)
    expect(view.locator('.jp-kubelab-FinalValues tr[data-metric="default"] td')).to_have_text(
        ["0.2", "0.4", "0.8"]
    )

    # Hover values: at the left edge, step 0, where loss is lr * 10.
    hover(page, chart, 0.01)
    expect(chart.locator(".u-legend .u-series").first.locator(".u-value")).to_have_text("0")
    assert legend_values(chart)[1:] == ["1", "2", "4"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare.png"))

    # From the table to a run's own view: its final result is a value, its loss a chart.
    table.get_by_role("button", name="cmp-a", exact=True).click()
    run_view = page.locator(f'.jp-kubelab-Detail[data-experiment-id="{ids["cmp-a"]}"]')
    final = run_view.locator('.jp-kubelab-FinalValues tr[data-metric="default"] td')
    expect(final).to_have_text("0.2", timeout=WAIT_MS)
    expect(run_view.locator('.jp-kubelab-Overlay[data-metric="default"]')).to_have_count(0)
    expect(run_view.locator('.jp-kubelab-Overlay[data-metric="loss"] canvas')).to_have_count(1)
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs").click()

    # Zoom: drag across the middle, the left edge is now a later step; Reset shows it all.
    box = chart.locator(".u-over").bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.5, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.95, y, steps=5)
    page.mouse.up()
    hover(page, chart, 0.01)
    assert int(legend_values(chart)[0]) >= 2
    chart.get_by_role("button", name="Reset zoom").click()
    hover(page, chart, 0.01)
    expect(chart.locator(".u-legend .u-series").first.locator(".u-value")).to_have_text("0")

    # Smoothing changes the later values; log scale and wall time keep the curves.
    hover(page, chart, 0.99)
    raw = legend_values(chart)[1:]
    view.locator('input[name="smoothing"]').fill("0.9")
    hover(page, chart, 0.98)
    hover(page, chart, 0.99)
    assert legend_values(chart)[1:] != raw
    view.locator('input[name="log"]').check()
    expect(chart.locator(".u-legend .u-series")).to_have_count(4)
    view.locator('select[name="axis"]').select_option("wall")
    expect(chart.locator(".u-legend .u-series").first).to_contain_text("time")

    # Columns are chosen in the UI.
    view.locator(".jp-kubelab-Compare-columns summary").click()
    view.locator(".jp-kubelab-Compare-columns label", has_text="lr").locator("input").uncheck()
    expect(table.locator('th[data-column="param:lr"]')).to_have_count(0)
    assert page.problems == []  # type: ignore[attr-defined]


def test_the_run_table_is_a_keyboard_grid(lab_server: JupyterServer, page: Page) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs").click()
    view = page.locator(".jp-kubelab-Compare")
    table = view.locator(".jp-kubelab-RunTable")
    expect(table).to_have_attribute("role", "grid")
    stop = table.locator('[tabindex="0"]')
    expect(stop).to_have_count(1)  # one tab stop, where the focus last was (cmp-a's name)
    stop.focus()
    assert page.evaluate("() => document.activeElement.textContent") == "cmp-a"
    page.keyboard.press("Home")  # the row's box
    assert page.evaluate("() => document.activeElement.type") == "checkbox"
    row = page.evaluate("() => document.activeElement.closest('tr').getAttribute('aria-rowindex')")
    first = table.locator(f'tr[aria-rowindex="{row}"]')
    run_id = first.get_attribute("data-experiment-id")
    name = first.locator(".jp-kubelab-RunTable-name button").inner_text()
    expect(view.locator("[data-compare-count]")).to_have_text("3 runs compared")
    page.keyboard.press("Space")  # the box unticks the run
    expect(view.locator("[data-compare-count]")).to_have_text("2 runs compared")
    page.keyboard.press("Space")
    expect(view.locator("[data-compare-count]")).to_have_text("3 runs compared")
    page.keyboard.press("ArrowDown")
    below = page.evaluate("() => document.activeElement.closest('tr').getAttribute('aria-rowindex')")
    assert int(below) == int(row) + 1
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")  # the name, a link to the run
    assert page.evaluate("() => document.activeElement.textContent") == name
    page.keyboard.press("Enter")
    expect(page.locator(f'.jp-kubelab-Detail[data-experiment-id="{run_id}"]')).to_be_visible(timeout=WAIT_MS)


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_row_menu_opens_from_the_keyboard_with_its_first_item_active(
    lab_server: JupyterServer, page: Page
) -> None:
    button = sidebar(page).get_by_role("button", name="Actions for cmp-a")
    button.focus()
    page.keyboard.press("Enter")
    active = page.locator(".jp-kubelab-RowMenu .lm-Menu-item.lm-mod-active")
    expect(active).to_have_count(1)
    first = page.locator(".jp-kubelab-RowMenu .lm-Menu-item").first
    expect(first).to_have_class(re.compile(r"\blm-mod-active\b"))
    page.keyboard.press("Escape")
    expect(page.locator(".jp-kubelab-RowMenu")).to_have_count(0)


def test_sidebar_text_is_no_smaller_than_jupyterlabs(lab_server: JupyterServer, page: Page) -> None:
    smallest = sidebar(page).evaluate("""root => {
        const base = parseFloat(getComputedStyle(document.body)
            .getPropertyValue('--jp-ui-font-size1'));
        const sizes = [...root.querySelectorAll('*')]
            // JupyterLab's own section titles keep JupyterLab's own (small caps) style
            .filter(n => !n.closest('.lm-AccordionPanel-title'))
            .filter(n => n.childNodes.length && [...n.childNodes].some(
                c => c.nodeType === 3 && c.textContent.trim()))
            .map(n => [parseFloat(getComputedStyle(n).fontSize), n.className]);
        sizes.sort((a, b) => a[0] - b[0]);
        return [sizes[0][0], base, sizes[0][1]];
    }""")
    assert smallest[0] >= smallest[1], smallest  # (size, JupyterLab's, the element's class)


def test_two_ticked_runs_open_a_diff_view(lab_server: JupyterServer, page: Page) -> None:
    ids = []
    for name, lr, body in (("diff-a", 0.1, "loss = lr * 2\n"), ("diff-b", 0.3, "loss = lr * 3\n")):
        folder = lab_server.root / name
        folder.mkdir()
        (folder / "train.py").write_text(
            f"import kubelab\nlr = kubelab.params()['lr']\n{body}kubelab.report(loss=loss)\n"
        )
        spec = {"name": name, "command": ["python", "train.py"], "code": {"path": "."}, "params": {"lr": lr}}
        response = lab_server.post(f"experiments?cwd={name}", spec)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    other = lab_server.post("experiments", {"name": "diff-other", "command": [sys.executable, "-c", "pass"]})
    assert other.status_code == 201, other.text
    for run_id in [*ids, other.json()["id"]]:
        assert lab_server.wait_for(run_id)["status"] == "Succeeded"

    page.goto(f"{lab_server.url}lab?kubelab=compare/{ids[0]},{ids[1]}&token={lab_server.token}")
    compare = page.locator(".jp-kubelab-Compare").last
    expect(compare).to_be_visible(timeout=WAIT_MS)
    diff_button = compare.get_by_role("button", name="Diff", exact=True)
    expect(diff_button).to_be_enabled(timeout=WAIT_MS)
    # "Selected only": the two ticked runs and none of the module's others.
    table_rows = compare.locator(".jp-kubelab-RunTable-row")
    expect(table_rows).not_to_have_count(2)
    compare.get_by_role("checkbox", name="Selected only").check()
    expect(table_rows).to_have_count(2)
    expect(table_rows).to_contain_text(["diff-b", "diff-a"])  # newest first, as in the sidebar
    diff_button.click()
    view = page.locator(f'[id="kubelab-diff-{ids[0]}-{ids[1]}"]')
    expect(view).to_be_visible(timeout=WAIT_MS)
    expect(view.locator(".jp-kubelab-Diff-side").first).to_contain_text("diff-a")
    lr_cells = view.locator('[data-diff="params"] tr[data-name="lr"] td')
    expect(lr_cells).to_have_text(["lr", "0.1", "0.3"])
    loss = view.locator('[data-diff="metrics"] tr[data-name="loss"] td')
    expect(loss).to_have_text(["loss", "0.2", "0.9", "0.7"])
    changed = view.locator('.jp-kubelab-Diff-file[data-path="train.py"]')
    expect(changed).to_have_attribute("data-change", "modified")
    expect(changed.locator('[data-line="removed"]')).to_contain_text(["loss = lr * 2"])
    expect(changed.locator('[data-line="added"]')).to_contain_text(["loss = lr * 3"])
    # Asked again for the same pair: the same tab.
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs").last.click()
    diff_button.click()
    expect(
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Diff diff-a · diff-b")
    ).to_have_count(1)
    # A link to a diff opens it (the other way round: its own tab, B's side first).
    page.goto(f"{lab_server.url}lab?kubelab=diff/{ids[1]},{ids[0]}&token={lab_server.token}")
    linked = page.locator(f'[id="kubelab-diff-{ids[1]}-{ids[0]}"]')
    expect(linked).to_be_visible(timeout=WAIT_MS)
    expect(linked.locator(".jp-kubelab-Diff-side").first).to_contain_text("diff-b")
    expect(linked.locator('[data-diff="params"] tr[data-name="lr"] td')).to_have_text(["lr", "0.3", "0.1"])
    assert not page.problems, page.problems  # type: ignore[attr-defined]


def test_one_cursor_moves_across_a_runs_charts(lab_server: JupyterServer, page: Page) -> None:
    script = "import kubelab\nfor s in range(11):\n    kubelab.report(step=s, loss=100 - s, acc=s * 10)\n"
    made = lab_server.post("experiments", {"name": "two-metrics", "command": [sys.executable, "-c", script]})
    assert made.status_code == 201, made.text
    run_id = made.json()["id"]
    assert lab_server.wait_for(run_id)["status"] == "Succeeded"
    page.goto(f"{lab_server.url}lab?kubelab=run/{run_id}&token={lab_server.token}")
    view = page.locator(f'[id="kubelab-experiment-view-{run_id}"]')
    loss = view.locator('.jp-kubelab-Overlay[data-metric="loss"]')
    acc = view.locator('.jp-kubelab-Overlay[data-metric="acc"]')
    expect(loss.locator("canvas")).to_have_count(1, timeout=WAIT_MS)
    expect(acc.locator("canvas")).to_have_count(1, timeout=WAIT_MS)
    # Hovering step 0 of the loss chart shows step 0 in the accuracy chart too, and the other
    # way round at the far end.
    hover(page, loss, 0.01)
    expect(acc.locator(".u-legend .u-series").first.locator(".u-value")).to_have_text("0")
    assert legend_values(acc)[1:] == ["0"] and legend_values(loss)[1:] == ["100"]
    hover(page, acc, 0.99)
    expect(loss.locator(".u-legend .u-series").first.locator(".u-value")).to_have_text("10")
    assert legend_values(loss)[1:] == ["90"]
    assert not page.problems, page.problems  # type: ignore[attr-defined]


def test_runs_grouped_by_a_parameter_draw_a_mean_and_a_band(lab_server: JupyterServer, page: Page) -> None:
    script = (
        "import kubelab\np = kubelab.params()\n"
        "for s in range(3):\n    kubelab.report(step=s, loss=p['lr'] * 10 + p['seed'] + s)\n"
    )
    ids = []
    for name, lr, seed in (("grp-a", 1, 0), ("grp-b", 1, 2), ("grp-c", 2, 0)):
        made = lab_server.post(
            "experiments",
            {"name": name, "command": [sys.executable, "-c", script], "params": {"lr": lr, "seed": seed}},
        )
        assert made.status_code == 201, made.text
        ids.append(made.json()["id"])
    for run_id in ids:
        assert lab_server.wait_for(run_id)["status"] == "Succeeded"
    page.goto(f"{lab_server.url}lab?kubelab=compare/{','.join(ids)}&token={lab_server.token}")
    compare = page.locator(".jp-kubelab-Compare:visible")  # the linked one, in front
    chart = compare.locator('.jp-kubelab-Overlay[data-metric="loss"]')
    expect(chart.locator(".u-legend .u-series")).to_have_count(4, timeout=WAIT_MS)  # x and three runs
    compare.locator('select[name="groupBy"]').select_option("param:lr")
    # Per group its mean, min and max: lr=1 holds two runs (10 and 12 at step 0), lr=2 one.
    expect(chart.locator(".u-legend .u-series")).to_have_count(7)
    expect(chart.locator(".u-legend")).to_contain_text("1 mean (2 runs)")
    expect(chart.locator(".u-legend")).to_contain_text("2 mean (1 runs)")
    hover(page, chart, 0.01)
    expect(chart.locator(".u-legend .u-series").first.locator(".u-value")).to_have_text("0")
    assert legend_values(chart)[1:] == ["11", "10", "12", "20", "20", "20"]
    compare.locator('select[name="groupBy"]').select_option("none")
    expect(chart.locator(".u-legend .u-series")).to_have_count(4)
    assert not page.problems, page.problems  # type: ignore[attr-defined]
