"""The log view's timestamps toggle in a real JupyterLab: a run prints lines some time apart,
its log shows each line's time (to the second, in a muted column) when the toggle is on, and
Download saves it so, and the plain log again when it is off."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_server_process import JupyterServer
from playwright.sync_api import Page, expect
from test_sidebar import WAIT_MS, open_panel, sidebar

LINES = """\
import time
for epoch in range(3):
    print(f"epoch {epoch} loss {1 / (epoch + 1):.2f}", flush=True)
    time.sleep(0.4)
"""
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z $")


def test_timestamps_toggle_shows_and_hides_each_lines_time(lab_server: JupyterServer, page: Page) -> None:
    (lab_server.root / "lines.py").write_text(LINES)
    response = lab_server.post("experiments", {"name": "timed-lines", "command": ["python", "lines.py"]})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    assert lab_server.wait_for(run_id)["status"] == "Succeeded"

    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    sidebar(page).locator(f'.jp-kubelab-Row[data-experiment-id="{run_id}"] .jp-kubelab-Row-name').click()
    logs = page.locator(f'.jp-kubelab-Detail[data-experiment-id="{run_id}"] .jp-kubelab-Logs')
    text = logs.locator(".jp-kubelab-Logs-text")
    expect(text).to_contain_text("epoch 2 loss 0.33", timeout=WAIT_MS)
    times = text.locator(".jp-kubelab-Logs-time")
    expect(times).to_have_count(0)

    logs.get_by_label("Timestamps").check()
    expect(times).to_have_count(3, timeout=WAIT_MS)
    shown = times.all_text_contents()
    assert all(TIME.match(t) for t in shown), shown  # with seconds (and their fraction)
    assert shown == sorted(shown) and len(set(shown)) == 3, shown  # printed 0.4 s apart
    lines = text.inner_text().splitlines()
    assert [line.removeprefix(stamp) for line, stamp in zip(lines, shown, strict=True)] == [
        "epoch 0 loss 1.00",
        "epoch 1 loss 0.50",
        "epoch 2 loss 0.33",
    ]
    muted = times.first.evaluate("n => getComputedStyle(n).color")
    assert muted != text.evaluate("n => getComputedStyle(n).color")  # a column apart from the text
    with page.expect_download() as download:
        logs.get_by_role("button", name="Download").click()
    saved = download.value.path()
    assert saved is not None
    assert Path(saved).read_text(encoding="utf-8") == "".join(f"{line}\n" for line in lines)  # as shown
    assert download.value.suggested_filename == f"timed-lines-{run_id}-replica0-timestamps.log"

    logs.get_by_label("Timestamps").uncheck()
    expect(times).to_have_count(0, timeout=WAIT_MS)
    expect(text).to_have_text("epoch 0 loss 1.00\nepoch 1 loss 0.50\nepoch 2 loss 0.33\n")
    assert not page.problems, page.problems  # type: ignore[attr-defined]
