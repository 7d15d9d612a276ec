"""The Pipelines sidebar in a real JupyterLab: a pipeline's steps as a graph of nodes
coloured by state that follows the pipeline live, a click on a step opening its
experiment, and the schedules listed with their next fire."""

from __future__ import annotations

import time
from typing import Any

from jupyter_server_process import JupyterServer
from playwright.sync_api import Locator, Page, expect

WAIT_MS = 90_000  # a first JupyterLab load on a busy 2-core machine
GREEN, BLUE = "#1a7f37", "#0969da"


def pipelines(page: Page) -> Locator:
    return page.locator('[id="kubelab:pipelines"]')


def node(page: Page, step: str) -> Locator:
    return pipelines(page).locator(f'.jp-kubelab-PipelineStep[data-step="{step}"]')


def test_the_graph_follows_a_pipeline_and_opens_its_steps(lab_server: JupyterServer, page: Page) -> None:
    root = lab_server.root
    (root / "wait.py").write_text("import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\n")
    quick = {"command": ["python", "-c", "pass"]}
    made = lab_server.post(
        "pipelines",
        {
            "spec": {
                "name": "graph",
                "steps": [
                    {"name": "prep", "experiment": quick},
                    {
                        "name": "train",
                        "depends_on": ["prep"],
                        "experiment": {"command": ["python", "wait.py"]},
                    },
                    {"name": "eval", "depends_on": ["train"], "experiment": quick},
                ],
            }
        },
    )
    assert made.status_code == 201, made.text
    scheduled = lab_server.post(
        "schedules", {"spec": {**quick, "name": "nightly-eval", "schedule": {"cron": "0 2 * * *"}}}
    )
    assert scheduled.status_code == 201, scheduled.text

    page.goto(f"{lab_server.url}lab?token={lab_server.token}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="kubelab:pipelines"]').click()
    expect(pipelines(page)).to_be_visible(timeout=10_000)
    expect(pipelines(page).locator(f'[data-pipeline-id="{made.json()["id"]}"]')).to_contain_text("graph")
    expect(node(page, "prep")).to_have_attribute("data-state", "succeeded", timeout=WAIT_MS)
    expect(node(page, "train")).to_have_attribute("data-state", "running", timeout=WAIT_MS)
    expect(node(page, "eval")).to_have_attribute("data-state", "waiting")
    expect(node(page, "prep").locator("rect")).to_have_attribute("fill", GREEN)
    expect(node(page, "train").locator("rect")).to_have_attribute("fill", BLUE)
    prep_box, eval_box = node(page, "prep").bounding_box(), node(page, "eval").bounding_box()
    assert prep_box and eval_box and prep_box["x"] < eval_box["x"]  # dependencies to the left
    schedule = pipelines(page).locator(f'[data-schedule-id="{scheduled.json()["id"]}"]')
    expect(schedule).to_contain_text("nightly-eval")
    expect(schedule).to_contain_text("0 2 * * *")

    (root / "go").touch()  # train finishes; the graph follows the event stream
    expect(node(page, "eval")).to_have_attribute("data-state", "succeeded", timeout=WAIT_MS)
    expect(node(page, "train").locator("rect")).to_have_attribute("fill", GREEN)

    train_id = lab_server.get(f"pipelines/{made.json()['id']}").json()["steps"][1]["id"]
    node(page, "train").click()
    expect(page.locator(f'[id="kubelab-experiment-view-{train_id}"]')).to_be_visible(timeout=30_000)
    assert not page.problems, page.problems  # type: ignore[attr-defined]


def in_view(page: Page, pipeline_id: str) -> Locator:
    return page.locator(f'[id="kubelab-pipeline-view-{pipeline_id}"]')


def test_a_pipeline_view_lays_out_its_graph_follows_it_and_survives_a_reload(
    lab_server: JupyterServer, page: Page
) -> None:
    root = lab_server.root
    (root / "gate.py").write_text(
        "import os, time\nwhile not os.path.exists('open'):\n    time.sleep(0.05)\n"
    )
    quick = {"command": ["python", "-c", "pass"]}
    made = lab_server.post(
        "pipelines",
        {
            "spec": {
                "name": "diamond",
                "steps": [
                    {"name": "fetch", "experiment": quick},
                    {
                        "name": "left",
                        "depends_on": ["fetch"],
                        "experiment": {"command": ["python", "gate.py"]},
                    },
                    {"name": "right", "depends_on": ["fetch"], "experiment": quick},
                    {"name": "join", "depends_on": ["left", "right"], "experiment": quick},
                ],
            }
        },
    )
    assert made.status_code == 201, made.text
    pipeline_id = made.json()["id"]

    # A link opens the pipeline in the main area.
    page.goto(f"{lab_server.url}lab?token={lab_server.token}&kubelab=pipeline/{pipeline_id}")
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    view = in_view(page, pipeline_id)
    expect(view).to_be_visible(timeout=30_000)
    expect(view.locator("h2")).to_have_text("diamond")
    expect(page.locator(".lm-TabBar-tab.jp-kubelab-Tab", has_text="Pipeline diamond")).to_be_visible()

    def step(name: str) -> Locator:
        return view.locator(f'.jp-kubelab-PipelineStep[data-step="{name}"]')

    expect(step("left")).to_have_attribute("data-state", "running", timeout=WAIT_MS)
    expect(step("right")).to_have_attribute("data-state", "succeeded", timeout=WAIT_MS)
    expect(step("join")).to_have_attribute("data-state", "waiting")
    expect(step("right").locator("rect")).to_have_attribute("fill", GREEN)
    expect(step("left").locator("rect")).to_have_attribute("fill", BLUE)
    # The layout: the two branches side by side one rank right of fetch, join right of both,
    # and an edge drawn for each dependency.
    # Measured until the layout settles: a state change redraws the graph.
    boxes: dict[str, Any] = {}

    def laid_out() -> bool:
        boxes.update({name: step(name).bounding_box() for name in ("fetch", "left", "right", "join")})
        fetch, left, right, join = (boxes[n] for n in ("fetch", "left", "right", "join"))
        return bool(
            fetch
            and left
            and right
            and join
            and fetch["x"] + fetch["width"] < left["x"]
            and left["x"] == right["x"]
            and abs(left["y"] - right["y"]) >= left["height"]  # one above the other, not overlapping
            and left["x"] + left["width"] < join["x"]
        )

    deadline = time.monotonic() + 30
    while not laid_out():
        assert time.monotonic() < deadline, f"the diamond was never laid out: {boxes}"
        time.sleep(0.1)
    expect(view.locator(".jp-kubelab-PipelineEdge")).to_have_count(4)
    expect(view.locator('.jp-kubelab-PipelineEdge[data-from="left"][data-to="join"]')).to_have_count(1)

    (root / "open").touch()  # the view follows the event stream
    expect(step("join")).to_have_attribute("data-state", "succeeded", timeout=WAIT_MS)
    expect(step("left").locator("rect")).to_have_attribute("fill", GREEN)
    expect(view.locator(".jp-kubelab-PipelineView-status")).to_have_text("Succeeded", timeout=WAIT_MS)

    # A reload brings the tab back (the layout restorer), and a step's row opens its run.
    lab_server.saved_in_workspace("kubelab-pipeline:", pipeline_id)
    page.reload()
    expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
    expect(view).to_be_visible(timeout=30_000)
    join_id = lab_server.get(f"pipelines/{pipeline_id}").json()["steps"][3]["id"]
    view.locator('tr[data-step="join"] a').click()
    expect(page.locator(f'[id="kubelab-experiment-view-{join_id}"]')).to_be_visible(timeout=30_000)

    # The sidebar's graph fits the sidebar's width instead of being cut off.
    page.locator('.jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id="kubelab:pipelines"]').click()
    pipelines(page).locator(f'[data-pipeline-id="{pipeline_id}"]').click()
    expect(pipelines(page).locator('.jp-kubelab-PipelineStep[data-step="join"]')).to_be_visible()
    sidebar = pipelines(page).bounding_box()
    graph = pipelines(page).locator(".jp-kubelab-PipelineGraph").bounding_box()
    assert sidebar and graph and graph["x"] + graph["width"] <= sidebar["x"] + sidebar["width"]
    assert not page.problems, page.problems  # type: ignore[attr-defined]
