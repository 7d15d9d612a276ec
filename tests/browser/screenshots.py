"""Retake the screenshots in docs/images: `python tests/browser/screenshots.py [FOLDER]`.

Starts a real JupyterLab with this build (the browser tests' `lab_at`), makes a few runs, a
grid sweep and a pipeline through the REST API, opens each view by its link in headless
system Chromium and saves the element alone (sidebar, experiment view, sweep view, Compare,
pipeline view), so the docs show what the current build draws. Build first (`jlpm build`).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, as pytest has it

from browser.conftest import CHROMIUM, CHROMIUM_ARGS, REPO, lab_at
from jupyter_server_process import JupyterServer
from playwright.sync_api import Locator, Page, expect, sync_playwright

WAIT_MS = 90_000  # a first JupyterLab load on a busy machine
MAX_BYTES = 200_000  # each image stays small enough for the docs
TRAIN = """\
import math, kubelab
p = kubelab.params({"lr": 0.1, "optimizer": "adam"})
for step in range(40):
    kubelab.report(step=step, loss=2 * math.exp(-p["lr"] * step) + 0.05, acc=1 - math.exp(-p["lr"] * step))
kubelab.report_final(2 * math.exp(-p["lr"] * 40))
"""
TRIAL = """\
import kubelab
p = kubelab.params()
for step in range(10):
    kubelab.report(step=step, loss=(p["x"] - 0.5) ** 2 + 1 / (step + 1) * p["lr"])
"""
RUNS = {"baseline": 0.05, "warmup": 0.1, "bigger-lr": 0.2, "cosine": 0.3}


def until(check: Callable[[], bool], what: str, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def make_work(server: JupyterServer) -> dict[str, str]:
    """A few finished runs, a finished sweep and a finished pipeline; returns their ids."""
    (server.root / "train.py").write_text(TRAIN)
    (server.root / "trial.py").write_text(TRIAL)
    ids: dict[str, str] = {}
    for name, lr in RUNS.items():
        made = server.post(
            "experiments", {"name": name, "command": ["python", "train.py"], "params": {"lr": lr}}
        )
        assert made.status_code == 201, made.text
        ids[name] = made.json()["id"]
    sweep = {
        "name": "lr-x-grid",
        "space": {
            "x": {"_type": "choice", "_value": [0.1, 0.5, 0.9]},
            "lr": {"_type": "choice", "_value": [0.5, 1]},
        },
        "objective": {"metric": "loss"},
        "tuner": "grid",
        "concurrency": 2,
        "trial": {"command": ["python", "trial.py"]},
    }
    made = server.post("sweeps", sweep)
    assert made.status_code == 201, made.text
    ids["sweep"] = made.json()["id"]

    def step(name: str, *after: str) -> dict[str, object]:
        experiment = {"name": f"nightly-{name}", "command": ["python", "-c", "pass"]}
        return {"name": name, "depends_on": list(after), "experiment": experiment}

    steps = [
        step("fetch"),
        step("clean", "fetch"),
        step("features", "fetch"),
        step("train", "clean", "features"),
        step("evaluate", "train"),
    ]
    made = server.post("pipelines", {"spec": {"name": "nightly-train", "steps": steps}})
    assert made.status_code == 201, made.text
    ids["pipeline"] = made.json()["id"]
    for name in RUNS:
        server.wait_for(ids[name], timeout=180)
    until(lambda: server.get(f"sweeps/{ids['sweep']}").json()["status"] != "Running", "the sweep")
    until(lambda: server.get(f"pipelines/{ids['pipeline']}").json()["status"] == "Succeeded", "the pipeline")
    return ids


# The right and bottom edges of what an element draws (its visible innermost elements), so a
# shot leaves out the empty part of a main-area panel.
CONTENT_EDGES = """node => {
  let right = 0, bottom = 0;
  for (const child of node.querySelectorAll('*')) {
    const box = child.getBoundingClientRect();
    if (child.childElementCount === 0 && box.width && box.height) {
      right = Math.max(right, box.right);
      bottom = Math.max(bottom, box.bottom);
    }
  }
  return [right, bottom];
}"""
# How much taller than its panel the element's content is (the panel, or the element, scrolls).
OVERFLOW = """node => {
  let most = 0;
  for (let n = node; n && !n.classList.contains('lm-DockPanel'); n = n.parentElement) {
    most = Math.max(most, n.scrollHeight - n.clientHeight);
  }
  return most;
}"""


def shoot(element: Locator, path: Path) -> None:
    """What the element draws, whole (the window grown to its height) and no more; checked to
    stay small."""
    page = element.page
    viewport = page.viewport_size
    assert viewport is not None
    overflow = element.evaluate(OVERFLOW)
    if overflow > 0:
        page.set_viewport_size(
            {"width": viewport["width"], "height": min(viewport["height"] + overflow + 40, 3000)}
        )
    page.wait_for_timeout(500)  # let charts redraw at the new size before the capture
    box = element.bounding_box()
    assert box is not None
    right, bottom = element.evaluate(CONTENT_EDGES)
    clip = {
        "x": box["x"],
        "y": box["y"],
        "width": min(box["x"] + box["width"], right + 16) - box["x"],
        "height": min(box["y"] + box["height"], bottom + 16) - box["y"],
    }
    page.screenshot(path=str(path), clip=clip, animations="disabled")  # type: ignore[arg-type]
    page.set_viewport_size(viewport)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise AssertionError(f"{path} is {size} bytes, over {MAX_BYTES}: crop it further")
    print(f"{path}: {size} bytes")


def widen_sidebar(page: Page, width: int) -> None:
    """Drag the left split handle, as a user makes room for the table's columns."""
    stack = page.locator("#jp-left-stack").bounding_box()
    assert stack is not None
    x, y = stack["x"] + stack["width"] + 1, stack["y"] + stack["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + width, y, steps=5)
    page.mouse.up()


def open_link(page: Page, server: JupyterServer, link: str = "") -> None:
    query = f"&kubelab={link}" if link else ""
    page.goto(f"{server.url}lab?token={server.token}{query}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)


def take(server: JupyterServer, page: Page, ids: dict[str, str], out: Path) -> None:
    # The experiment view first: the link opens it, and the sidebar shows beside it.
    run = ids["warmup"]
    open_link(page, server, f"run/{run}")
    view = page.locator(f'[id="kubelab-experiment-view-{run}"]')
    expect(view.locator('.jp-kubelab-Overlay[data-metric="loss"] canvas')).to_have_count(1, timeout=WAIT_MS)
    shoot(view, out / "experiment-view.png")

    page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="kubelab:sidebar"]').click()
    sidebar = page.locator('[id="kubelab:sidebar"]')
    expect(sidebar.locator(f'.jp-kubelab-Row[data-experiment-id="{run}"]')).to_be_visible(timeout=WAIT_MS)
    expect(sidebar.locator(f'.jp-kubelab-Sweep[data-sweep-id="{ids["sweep"]}"]')).to_be_visible()
    widen_sidebar(page, 200)  # room for the table's columns
    shoot(sidebar, out / "sidebar.png")

    sweep = ids["sweep"]
    open_link(page, server, f"sweep/{sweep}")
    view = page.locator(f'.jp-kubelab-SweepView:visible .jp-kubelab-Detail[data-sweep-id="{sweep}"]')
    expect(view.locator(".jp-kubelab-Overlay canvas").first).to_be_visible(timeout=WAIT_MS)
    shoot(view, out / "sweep-view.png")

    compared = ",".join(ids[name] for name in RUNS)
    open_link(page, server, f"compare/{compared}")
    view = page.locator(".jp-kubelab-Compare:visible")
    expect(view.locator("[data-compare-count]")).to_have_text(f"{len(RUNS)} runs compared", timeout=WAIT_MS)
    expect(view.locator('.jp-kubelab-Overlay[data-metric="loss"] canvas')).to_have_count(1)
    shoot(view, out / "compare.png")
    # Grouped: the four runs (none in a sweep) as one mean with its min–max band.
    view.locator('select[name="groupBy"]').select_option("sweep")
    charts = view.locator(".jp-kubelab-Charts")
    expect(charts.locator('.jp-kubelab-Overlay[data-metric="loss"] .u-legend .u-series')).to_have_count(4)
    shoot(charts, out / "compare-grouped.png")

    pipeline = ids["pipeline"]
    open_link(page, server, f"pipeline/{pipeline}")
    view = page.locator(f'[id="kubelab-pipeline-view-{pipeline}"]')
    expect(view.locator(".jp-kubelab-PipelineView-status")).to_have_text("Succeeded", timeout=WAIT_MS)
    shoot(view, out / "pipeline-view.png")
    problems = getattr(page, "problems", [])
    if problems:
        raise AssertionError(f"the page reported problems: {problems}")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, lab_at(Path(tmp)) as server:
        ids = make_work(server)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
                take(server, page, ids, out)
            finally:
                browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "images")
