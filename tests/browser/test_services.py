"""Services in a real JupyterLab: a small sweep trains scikit-learn models, its best trial is
served from the sweep view (a wrong model path first, refused naming the field), the
sidebar's Services section follows the service to Running (the server's `service` events),
and the Try-it panel sends a v2 inference request through the Jupyter server's proxy and
shows the prediction, its status and latency, then the model server's own 422 for a body of
the wrong shape; Stop and Delete end it from its row.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_server_process import JupyterServer
from playwright.sync_api import Locator, Page, expect
from serving_support import IRIS_ROWS, infer_body
from test_sidebar import ARTIFACTS, WAIT_MS, open_panel, sidebar

TRIAL = """\
import joblib, os, kubelab
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression
c = kubelab.params()["c"]
X, y = load_iris(return_X_y=True)
model = LogisticRegression(C=c, max_iter=500).fit(X, y)
joblib.dump(model, os.path.join(os.environ["KUBELAB_OUTPUTS_DIR"], "model.joblib"))
kubelab.report_final({"accuracy": model.score(X, y)})
"""

PREFILLED = {"inputs": [{"name": "input-0", "shape": [1, 1], "datatype": "FP64", "data": [0]}]}
LATENCY = re.compile(r"^200 OK · \d+\.\d ms$")


@pytest.fixture
def no_service_left(lab_server: JupyterServer) -> Iterator[None]:
    """A failed test leaves no model server running on the machine."""
    yield
    for view in lab_server.get("services").json()["items"]:
        lab_server.post(f"services/{view['id']}/stop")


def ended_sweep(server: JupyterServer, sweep_id: str, timeout: float = 180.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        record: dict[str, Any] = server.get(f"sweeps/{sweep_id}").json()
        if record["status"] in ("Succeeded", "Failed", "Stopped") or time.monotonic() > deadline:
            return record
        time.sleep(0.2)


def serve_best(page: Page, view: Locator, model: str) -> None:
    """The sweep view's Serve best… dialog, named `iris`, serving `model` of the best trial."""
    view.get_by_role("button", name="Serve best…").click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator('input[name="name"]')).to_have_value("iris-c")  # from the sweep's name
    dialog.locator('input[name="name"]').fill("iris")
    dialog.locator('input[name="path"]').fill(model)
    dialog.get_by_role("button", name="Serve").click()
    expect(dialog.get_by_role("button", name="Serve")).to_have_count(0)


def service_row(page: Page, service_id: str) -> Locator:
    return sidebar(page).locator(f'.jp-kubelab-Service[data-service-id="{service_id}"]')


def test_the_best_trial_of_a_sweep_answers_from_the_try_it_panel(
    lab_server: JupyterServer, page: Page, no_service_left: None
) -> None:
    response = lab_server.post(
        "sweeps",
        {
            "name": "iris-c",
            "space": {"c": {"_type": "choice", "_value": [0.01, 1.0]}},
            "objective": {"metric": "accuracy", "direction": "maximize"},
            "tuner": "grid",
            "concurrency": 2,
            "trial": {"command": [sys.executable, "-c", TRIAL]},
        },
    )
    assert response.status_code == 201, response.text
    sweep = ended_sweep(lab_server, response.json()["id"])
    assert sweep["status"] == "Succeeded" and sweep["best"]["params"] == {"c": 1.0}, sweep

    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    open_panel(page)
    section = sidebar(page).locator(".jp-kubelab-ServicesSection")
    expect(section).to_contain_text("No services", timeout=WAIT_MS)

    sidebar(page).locator(f'.jp-kubelab-Sweep[data-sweep-id="{sweep["id"]}"]').click()
    view = page.locator(f'.jp-kubelab-Detail[data-sweep-id="{sweep["id"]}"]')
    serve_best(page, view, "outputs/none.joblib")  # refused by field, nothing started
    error = page.locator(".jp-Dialog")
    expect(error).to_contain_text("Cannot serve the best trial")
    expect(error).to_contain_text("model.path")
    error.locator("button").last.click()  # showErrorMessage's one button
    assert lab_server.get("services").json()["items"] == []
    serve_best(page, view, "outputs/model.joblib")
    row = service_row(page, "iris-v1")
    expect(row).to_have_attribute("data-state", "Running", timeout=WAIT_MS)  # from the events alone
    expect(row.locator(".jp-kubelab-Service-replicas")).to_have_text("1/1")
    expect(row.locator(".jp-kubelab-Service-serves")).to_have_text(
        f"sweep {sweep['id']} · trial #{sweep['best']['trial']} · outputs/model.joblib"
    )
    expect(row.locator(".jp-kubelab-Service-url")).to_have_text("/kubelab/services/iris-v1/")
    expect(row.locator(".jp-kubelab-Service-stats")).to_have_text("no requests yet")

    row.get_by_role("button", name="Try it").click()
    panel = page.locator('.jp-kubelab-TryIt[data-service-id="iris-v1"]')
    expect(panel).to_be_visible(timeout=WAIT_MS)
    expect(panel.locator(".jp-kubelab-TryIt-endpoint")).to_have_text(
        "POST /kubelab/services/iris-v1/v2/models/iris/infer"
    )
    body = panel.locator("textarea.jp-kubelab-TryIt-body")
    expect(body).to_have_value(json.dumps(PREFILLED, indent=2), timeout=WAIT_MS)  # no declared inputs
    body.fill(json.dumps(infer_body(IRIS_ROWS)))
    panel.get_by_role("button", name="Send").click()
    status = panel.locator(".jp-kubelab-TryIt-status")
    expect(status).to_have_attribute("data-status", "200", timeout=WAIT_MS)
    expect(status).to_have_text(LATENCY)
    answer = json.loads(panel.locator(".jp-kubelab-TryIt-answer").inner_text())
    assert answer["model_name"] == "iris" and answer["outputs"][0]["data"] == [0, 2]  # setosa, virginica
    page.screenshot(path=str(ARTIFACTS / "service-try-it.png"))

    body.fill(json.dumps({"instances": IRIS_ROWS}))  # not the protocol's shape: MLServer's 422, as it is
    body.press("Control+Enter")
    expect(status).to_have_attribute("data-status", "422", timeout=WAIT_MS)
    expect(panel.locator(".jp-kubelab-TryIt-answer.jp-mod-error")).to_contain_text('"inputs"')
    stats = row.locator(".jp-kubelab-Service-stats")  # the proxy's figures, read again every 10 s
    expect(stats).to_have_text(re.compile(r"^\d+(\.\d)? req/s · p50 \d+(\.\d)? ms$"), timeout=WAIT_MS)
    figures = lab_server.get("services/iris-v1").json()["stats"]
    assert figures["requests"] >= 2 and figures["errors"] == 0  # the 200 and the 422 (a 4xx is no failure)
    body.fill("{not json")
    panel.get_by_role("button", name="Send").click()
    expect(panel.locator(".jp-kubelab-TryIt-answer")).to_contain_text("body: not JSON")

    row.get_by_role("button", name="Stop").click()
    expect(row).to_have_attribute("data-state", "Stopped", timeout=WAIT_MS)
    row.get_by_role("button", name="Delete").click()
    page.locator(".jp-Dialog").get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0, timeout=WAIT_MS)
    assert lab_server.get("services").json()["items"] == []
    problems: list[str] = page.problems  # type: ignore[attr-defined]
    assert [p.split(chr(10))[0] for p in problems] == [
        "Showing error: cannot start the service"
    ]  # the refusal shown
