"""The browser views at scale: the sidebar and Compare with 10,000 runs, against the same page
with 100 runs, both measured in this run (headless Chromium, a real JupyterLab with the built
extension). Prints one JSON line per measure, each with `ratio` = large over small:

- `views_sidebar_open`: showing the Experiments sidebar until its rows are drawn (target 300 ms);
- `views_compare_open`: Compare runs, from the click until its run table is drawn (300 ms);
- `views_compare_tick`: ticking a run until its box and colour swatch are drawn (50 ms);
- `views_sidebar_filter`: from the last key typed in the PQL box until the table shows the
  server's matches, the pause in typing included (150 ms).

Times are taken in the page (`performance.now()` to the first animation frame that shows the
result), so Playwright's round trips are not in them. The extension must be built
(`jlpm build`). Run: `python benchmarks/bench_views.py [--runs 10000] [--baseline 100]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_core import make_records  # noqa: E402  (a sibling script: the same 10,000 records)
from jupyter_server_process import JupyterServer  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

CHROMIUM = os.environ.get("KUBELAB_CHROMIUM", "/usr/bin/chromium")
TARGETS_MS = {"sidebar_open": 300, "compare_open": 300, "compare_tick": 50, "sidebar_filter": 150}
WAIT_MS = 120_000

# Runs `act` (a JS function body), then waits frame by frame until `done` holds; milliseconds.
TIMED = """async ([act, done, since]) => {
  const start = since ? window[since] : performance.now();
  new Function(act)();
  const holds = new Function('return (' + done + ')');
  const deadline = performance.now() + 60000;
  while (!holds()) {
    if (performance.now() > deadline) throw new Error('timed out: ' + done);
    await new Promise(resolve => requestAnimationFrame(resolve));
  }
  await new Promise(resolve => requestAnimationFrame(resolve));
  return performance.now() - start;
}"""
SIDEBAR = '[id="kubelab:sidebar"]'
SIDEBAR_TAB = '.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="kubelab:sidebar"]'
SIDEBAR_ROWS = f"document.querySelectorAll('{SIDEBAR} .jp-kubelab-Row').length"
SIDEBAR_SHOWN = f"document.querySelector('{SIDEBAR}').offsetParent !== null && {SIDEBAR_ROWS} > 0"
COMPARE_ROWS = "document.querySelectorAll('.jp-kubelab-Compare .jp-kubelab-RunTable-row').length"


def timed(page: Page, act: str, done: str, since: str = "") -> float:
    """`since`: a page variable holding when the input began (the last key, the last press)
    when Playwright sends it; otherwise the time starts with `act`."""
    return float(page.evaluate(TIMED, [act, done, since]))


def click(selector: str) -> str:
    return f"document.querySelector({json.dumps(selector)}).click()"


def press(selector: str) -> str:
    """A pointer press, as Lumino's tab bars (which ignore `click`) take one."""
    options = "{bubbles: true, button: 0, isPrimary: true}"
    return (
        f"const node = document.querySelector({json.dumps(selector)});"
        f"node.dispatchEvent(new PointerEvent('pointerdown', {options}));"
        f"node.dispatchEvent(new PointerEvent('pointerup', {options}));"
    )


@contextmanager
def lab(runs: int, tmp: Path) -> Iterator[JupyterServer]:
    """JupyterLab with this build of the extension over a home of `runs` finished runs."""
    build = ROOT / "kubelab" / "labextension"
    if not (build / "package.json").exists():
        raise SystemExit(f"{build} is missing: build the extension first with `jlpm build`")
    extensions = tmp / "jupyter-path" / "labextensions"
    extensions.mkdir(parents=True)
    (extensions / "kubelab").symlink_to(build, target_is_directory=True)
    make_records(tmp / "kubelab", runs)
    env = {
        "JUPYTER_PATH": str(tmp / "jupyter-path"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "KUBELAB_MACHINE_DIR": str(tmp / "machine"),
    }
    extra = ["--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    with JupyterServer(tmp / "root", tmp / "kubelab", app="lab", env=env, extra=extra) as server:
        yield server


def measure(server: JupyterServer, page: Page, repeats: int) -> dict[str, list[float]]:
    page.goto(f"{server.url}lab?token={server.token}")
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=WAIT_MS)
    page.evaluate(
        "() => { const at = name => () => (window[name] = performance.now());"
        " document.addEventListener('keydown', at('kubelabLastKey'), true);"
        " document.addEventListener('pointerdown', at('kubelabLastPress'), true); }"
    )
    page.wait_for_selector(SIDEBAR_TAB, timeout=WAIT_MS)
    if not page.locator(SIDEBAR).is_visible():  # a reload restores it open
        page.locator(SIDEBAR_TAB).click()
    page.wait_for_selector(f"{SIDEBAR} .jp-kubelab-Row", timeout=WAIT_MS)
    samples: dict[str, list[float]] = {name: [] for name in TARGETS_MS}
    for _ in range(repeats):
        page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="filebrowser"]').click()
        page.wait_for_selector(SIDEBAR, state="hidden")
        page.locator(SIDEBAR_TAB).click()
        samples["sidebar_open"].append(timed(page, "", SIDEBAR_SHOWN, since="kubelabLastPress"))

        box = page.locator(SIDEBAR).get_by_label("Filter experiments (PQL)")
        box.fill("")
        box.press("Enter")
        page.wait_for_function(f"{SIDEBAR_ROWS} > 1")
        box.click()
        page.keyboard.type("name:exp-7")  # one match at any size
        samples["sidebar_filter"].append(timed(page, "", f"{SIDEBAR_ROWS} === 1", since="kubelabLastKey"))
        box.fill("")
        box.press("Enter")
        page.wait_for_function(f"{SIDEBAR_ROWS} > 1")

        compare = f'{SIDEBAR} .jp-Toolbar-item[data-jp-item-name="compare"] .jp-ToolbarButtonComponent'
        samples["compare_open"].append(timed(page, click(compare), f"{COMPARE_ROWS} > 0"))
        tick = ".jp-kubelab-Compare .jp-kubelab-RunTable-row:nth-child(3) input[type=checkbox]"
        samples["compare_tick"].append(
            timed(
                page, click(tick), "document.querySelector('.jp-kubelab-Compare .jp-kubelab-RunTable-swatch')"
            )
        )
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Compare runs")
        tab.locator(".lm-TabBar-tabCloseIcon").click()
        page.wait_for_selector(".jp-kubelab-Compare", state="detached")
    return samples


def run_page(runs: int, repeats: int) -> dict[str, list[float]]:
    with (
        tempfile.TemporaryDirectory(prefix="kubelab-bench-views-") as tmp,
        lab(runs, Path(tmp)) as server,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        try:
            page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
            measure(server, page, 1)  # warm: JupyterLab's first load and the server's index
            return measure(server, page, repeats)
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    large = run_page(args.runs, args.repeats)
    small = run_page(args.baseline, args.repeats)
    for name, target in TARGETS_MS.items():
        median, baseline = statistics.median(large[name]), statistics.median(small[name])
        line: dict[str, Any] = {
            "bench": f"views_{name}",
            "runs": args.runs,
            "median_ms": round(median, 1),
            "baseline_runs": args.baseline,
            "baseline_median_ms": round(baseline, 1),
            "ratio": round(median / baseline, 2),
            "target_ms": target,
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
