"""A run's system metrics where users look, in a real JupyterLab: the experiment view's System
section (GPU utilisation, memory and power charts, one line per GPU; the sums; why a source was
not measured), the system columns of Compare and of a sweep's trials table, and the sidebar's
My usage line.

The runs' samples are written by the runs themselves in the runner's `system.jsonl` format (the
server samples nothing here), so every number on the page is known.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from browser.conftest import lab_at, serving
from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect
from test_sidebar import WAIT_MS, open_panel, sidebar

# Two GPUs for 200 samples at 5 s: GPU 0 at 80/100% (mean 90) drawing 250 W, with one
# 20 GiB memory spike; GPU 1 at 10% whose board reports no power. Shifted to end now.
SAMPLES = """\
import json, os, sys, time
import kubelab
util, power = (float(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (50.0, kubelab.params()["power"])
end = time.time()
path = os.path.join(os.environ["KUBELAB_RUN_DIR"], "system.jsonl")
with open(path, "w") as handle:
    handle.write(json.dumps({"sources": {"gpu": "nvml"}, "missing": {"process": "not sampled here"}}) + "\\n")
    for i in range(200):
        gpu0 = {"index": 0, "util": util + (10 if i % 2 else -10), "memory_mib": 20480 if i == 100 else 10240}
        if power:
            gpu0["power_w"] = power
        gpu1 = {"index": 1, "util": 10, "memory_mib": 512}
        handle.write(json.dumps({"time": end - 5 * (199 - i), "gpus": [gpu0, gpu1]}) + "\\n")
kubelab.report_final(util)
"""


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    folder = tmp_path_factory.mktemp("lab")
    with serving(lab_at(folder, KUBELAB_SYSTEM_METRICS_INTERVAL="0"), folder) as server:
        (server.root / "samples.py").write_text(SAMPLES)
        yield server


def submit(server: JupyterServer, name: str, *args: str) -> str:
    response = server.post("experiments", {"name": name, "command": [sys.executable, "samples.py", *args]})
    assert response.status_code == 201, response.text
    run_id: str = response.json()["id"]
    return run_id


def test_the_experiment_view_charts_each_gpu_and_says_what_was_not_measured(
    lab_server: JupyterServer, page: Page
) -> None:
    busy = submit(lab_server, "busy", "90", "250")
    quiet = lab_server.post("experiments", {"name": "quiet", "command": [sys.executable, "-c", "pass"]})
    assert quiet.status_code == 201
    for run_id in (busy, quiet.json()["id"]):
        assert lab_server.wait_for(run_id)["status"] == "Succeeded"
    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    # The sidebar's My usage: this week's runs, the one without samples counted as a run.
    expect(sidebar(page).locator(".jp-kubelab-MyUsage-line")).to_have_text(
        "0.5528 GPU-h · 69.1 Wh · GPU 50% mean · 2 runs", timeout=WAIT_MS
    )
    row = sidebar(page).locator(f'.jp-kubelab-Row[data-experiment-id="{busy}"]')
    row.locator(".jp-kubelab-Row-name").click()
    view = page.locator(f'.jp-kubelab-Detail[data-experiment-id="{busy}"] .jp-kubelab-Detail-system')
    # 2 GPUs x 995 s; 250 W x 995 s; the mean of 90% and 10%.
    expect(view.locator(".jp-kubelab-System-summary")).to_have_text(
        "GPU 50% mean (p95 100%) · 0.5528 GPU-h · 69.1 Wh · peak GPU memory 20 GiB", timeout=WAIT_MS
    )
    expect(view.locator(".jp-kubelab-System-missing")).to_have_text("No process metrics: not sampled here")
    charts = view.locator(".jp-kubelab-Overlay")
    expect(charts).to_have_count(3)
    util = view.locator('.jp-kubelab-Overlay[data-metric="system/util"]')
    expect(util.locator(".jp-kubelab-Overlay-title")).to_contain_text("GPU utilisation (%)")
    labels = util.locator(".u-legend .u-series .u-label").all_inner_texts()
    assert labels[1:] == ["GPU 0", "GPU 1"], labels
    power = view.locator('.jp-kubelab-Overlay[data-metric="system/power_w"]')
    assert power.locator(".u-legend .u-series .u-label").all_inner_texts()[1:] == ["GPU 0"]  # GPU 1: no power
    # Hovering reads a sample (200 samples: one a bucket): GPU 0 at 80 or 100, GPU 1 at 10.
    box = util.locator(".u-over").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)
    values = util.locator(".u-legend .u-series .u-value").all_inner_texts()
    assert float(values[1]) in (80, 100) and float(values[2]) == 10, values
    canvas = util.locator("canvas")
    assert canvas.evaluate("c => c.width > 0 && c.height > 0")

    # A run without GPU samples says why, and draws no chart of zeros.
    sidebar(page).locator(
        f'.jp-kubelab-Row[data-experiment-id="{quiet.json()["id"]}"] .jp-kubelab-Row-name'
    ).click()
    other = page.locator(
        f'.jp-kubelab-Detail[data-experiment-id="{quiet.json()["id"]}"] .jp-kubelab-Detail-system'
    )
    expect(other.locator(".jp-kubelab-Sidebar-empty")).to_have_text("No system samples.", timeout=WAIT_MS)
    expect(other.locator(".jp-kubelab-Overlay")).to_have_count(0)


def test_compare_and_the_trials_table_show_system_columns(lab_server: JupyterServer, page: Page) -> None:
    spec = {
        "name": "sys-sweep",
        "space": {"power": {"_type": "choice", "_value": [0, 300]}},
        "objective": {"metric": "default"},
        "tuner": "grid",
        "concurrency": 1,
        "trial": {"command": [sys.executable, "samples.py"]},  # at the power it is given (0: none read)
    }
    response = lab_server.post("sweeps", spec)
    assert response.status_code == 201, response.text
    sweep_id = response.json()["id"]
    item = sidebar(page).locator(f'.jp-kubelab-Sweep[data-sweep-id="{sweep_id}"]')
    expect(item).to_have_attribute("data-status", "Succeeded", timeout=WAIT_MS)
    item.click()
    trials = page.locator(f'.jp-kubelab-Detail[data-sweep-id="{sweep_id}"] .jp-kubelab-Trials')
    expect(trials.locator('th[data-column="system:energy_wh"]')).to_be_visible(timeout=WAIT_MS)
    energy = {
        row.get_attribute("data-trial"): row.locator('td[data-system="energy_wh"]').inner_text()
        for row in trials.locator("tbody tr").all()
    }
    assert sorted(energy.values()) == ["82.92 Wh", "—"], energy  # 300 W x 995 s; no power read
    expect(trials.locator('th[data-column="system:gpu_util"]')).to_be_visible()

    open_panel(page)
    sidebar(page).get_by_role("button", name="Compare").click()
    table = page.locator(".jp-kubelab-Compare .jp-kubelab-RunTable")
    expect(table.locator('th[data-column="system:gpu_util"]')).to_be_visible(timeout=WAIT_MS)
    expect(table.locator('th[data-column="system:gpu_memory_peak_mib"]')).to_be_visible()
    busy = table.locator(".jp-kubelab-RunTable-row", has_text="busy")
    expect(busy.locator('td[data-system="gpu_util"]')).to_have_text("50%")
    expect(busy.locator('td[data-system="energy_wh"]')).to_have_text("69.1 Wh")
    quiet = table.locator(".jp-kubelab-RunTable-row", has_text="quiet")
    expect(quiet.locator('td[data-system="gpu_util"]')).to_have_text("—")  # nothing measured: not 0%
    table.locator('th[data-column="system:gpu_util"] button').click()  # sort ascending
    first = table.locator(".jp-kubelab-RunTable-row").first
    expect(first.locator('td[data-system="gpu_util"]')).not_to_have_text("—")
