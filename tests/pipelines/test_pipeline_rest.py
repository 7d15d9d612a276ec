"""Pipelines and schedules through a real Jupyter server: the REST resources, the OpenAPI
document, the event stream, refusals, and a server that restarts a dead pipeline driver."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from driver_support import stop_leftovers
from jupyter_server_process import JupyterServer
from pipeline_support import step_runs, wait_driver_gone

from kubelab.experiments import Experiments
from kubelab.pipelines.service import Pipelines

OK = {"command": ["python", "-c", "import kubelab; kubelab.report(acc=0.9)"]}


def two_steps() -> dict[str, Any]:
    return {
        "name": "rest",
        "params": {"n": 1},
        "steps": [
            {"name": "train", "outputs": ["acc"], "experiment": OK},
            {
                "name": "eval",
                "depends_on": ["train"],
                "experiment": {
                    "command": [
                        "python",
                        "-c",
                        "import sys; assert float(sys.argv[1]) == 0.9 and sys.argv[2] == '2'",
                        "{{ steps.train.metrics.acc }}",
                        "{{ params.n }}",
                    ]
                },
            },
        ],
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("rest")
    env = {
        "KUBELAB_MACHINE_DIR": str(base / "machine"),
        "KUBELAB_STOP_GRACE": "2",
        "KUBELAB_PIPELINE_CRASH": "",
    }
    try:
        with JupyterServer(base / "workspace", base / "home", env=env) as running:
            yield running
    finally:
        stop_leftovers(base / "home")


def wait_done(server: JupyterServer, pipeline_id: str, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    record: dict[str, Any] = {}
    while time.monotonic() < deadline:
        record = next(r for r in server.get("pipelines").json()["items"] if r["id"] == pipeline_id)
        if record["status"] != "Running":
            full: dict[str, Any] = server.get(f"pipelines/{pipeline_id}").json()
            return full
        time.sleep(0.1)
    raise AssertionError(record)


class EventReader(threading.Thread):
    def __init__(self, server: JupyterServer) -> None:
        super().__init__(daemon=True)
        self.response = requests.get(server.api + "events", headers=server.headers, stream=True, timeout=60)
        self.pipelines: list[dict[str, Any]] = []

    def run(self) -> None:
        kind = None
        try:
            for line in self.response.iter_lines(chunk_size=1, decode_unicode=True):
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "pipeline":
                    self.pipelines.append(json.loads(line[6:]))
        except Exception:
            return


def test_create_list_get_with_events_and_openapi(server: JupyterServer) -> None:
    events = EventReader(server)
    events.start()
    made = server.post("pipelines", {"spec": two_steps(), "params": {"n": 2}})
    assert made.status_code == 201, made.text
    pipeline_id = made.json()["id"]
    done = wait_done(server, pipeline_id)
    assert done["status"] == "Succeeded", done
    assert [s["record"]["status"] for s in done["steps"]] == ["Succeeded", "Succeeded"]
    assert done["spec"]["params"] == {"n": 2}
    query = server.get("experiments", params={"query": f"pipeline:{pipeline_id}, step:eval"}).json()
    assert [r["id"] for r in query["items"]] == [done["steps"][1]["id"]]
    deadline = time.monotonic() + 30
    while not any(e["id"] == pipeline_id and e["status"] == "Succeeded" for e in events.pipelines):
        assert time.monotonic() < deadline, events.pipelines
        time.sleep(0.05)
    events.response.close()
    paths = server.get("openapi.json").json()["paths"]
    for path in (
        "pipelines",
        "pipelines/{pipeline_id}",
        "pipelines/{pipeline_id}/stop",
        "pipelines/{pipeline_id}/resume",
        "schedules",
        "schedules/{schedule_id}",
        "schedules/{schedule_id}/pause",
        "schedules/{schedule_id}/resume",
    ):
        assert "/kubelab/api/" + path in paths, path


def test_a_spec_file_stop_resume_and_schedules(server: JupyterServer) -> None:
    (server.root / "flows").mkdir(exist_ok=True)
    (server.root / "flows" / "wait.py").write_text(
        "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\n"
    )
    (server.root / "flows" / "flow.json").write_text(
        json.dumps({"steps": [{"name": "waits", "experiment": {"command": ["python", "wait.py"]}}]})
    )
    made = server.post("pipelines", {"file": "flows/flow.json"})
    assert made.status_code == 201, made.text
    pipeline_id = made.json()["id"]
    stopped = server.post(f"pipelines/{pipeline_id}/stop")
    assert stopped.status_code == 200 and stopped.json()["status"] == "Stopped", stopped.text
    assert server.post(f"pipelines/{pipeline_id}/stop").status_code == 409
    (server.root / "flows" / "go").touch()
    assert server.post(f"pipelines/{pipeline_id}/resume").status_code == 200
    assert wait_done(server, pipeline_id)["status"] == "Succeeded"
    scheduled = server.post("schedules", {"spec": {**two_steps(), "schedule": {"cron": "0 2 * * *"}}})
    assert scheduled.status_code == 201, scheduled.text
    schedule_id = scheduled.json()["id"]
    assert scheduled.json()["kind"] == "pipeline" and scheduled.json()["next_at"].endswith("T02:00:00.000Z")
    assert server.post(f"schedules/{schedule_id}/pause").json()["paused"] is True
    assert server.post(f"schedules/{schedule_id}/pause").status_code == 409
    assert server.post(f"schedules/{schedule_id}/resume").json()["paused"] is False
    assert [s["id"] for s in server.get("schedules").json()["items"]] == [schedule_id]
    assert server.get(f"schedules/{schedule_id}").json()["cron"] == "0 2 * * *"
    assert server.get("schedules/0123456789ab").status_code == 404
    assert server.delete(f"schedules/{schedule_id}").status_code == 204
    assert server.get("schedules").json()["items"] == []


def test_errors_name_the_field_and_create_nothing(server: JupyterServer) -> None:
    before = server.get("pipelines").json()["items"]
    cycle = server.post(
        "pipelines", {"spec": {"steps": [{"name": "a", "depends_on": ["a"], "experiment": OK}]}}
    )
    assert cycle.status_code == 422 and cycle.json()["fields"][0]["path"] == "steps.a.depends_on"
    outside = server.post(
        "pipelines", {"spec": {"steps": [{"name": "a", "experiment": {**OK, "workdir": "/"}}]}}
    )
    assert outside.status_code == 422, outside.text
    assert outside.json()["fields"][0]["path"] == "steps.a.experiment.workdir"
    assert server.post("pipelines", {"file": "../etc/passwd"}).json()["fields"][0]["path"] == "file"
    assert server.post("pipelines", {"spec": two_steps(), "extra": 1}).json()["fields"][0]["path"] == "extra"
    scheduled = server.post("pipelines", {"spec": {**two_steps(), "schedule": "0 2 * * *"}})
    assert scheduled.status_code == 422 and scheduled.json()["fields"][0]["path"] == "spec.schedule"
    bad_cron = server.post("schedules", {"spec": {**two_steps(), "schedule": "every night"}})
    assert bad_cron.status_code == 422 and bad_cron.json()["fields"][0]["path"] == "schedule.cron"
    assert server.get("pipelines").json()["items"] == before
    assert server.get("pipelines/0123456789ab").status_code == 404
    assert server.post("schedules/nope/pause").status_code == 404
    assert requests.get(server.api + "pipelines", timeout=30).status_code == 403  # no token
    assert requests.post(server.api + "schedules", timeout=30, json={}).status_code == 403


def test_a_server_restarts_a_dead_pipeline_driver(tmp_path: Path) -> None:
    home, root = tmp_path / "home", tmp_path / "workspace"
    env = {"KUBELAB_MACHINE_DIR": str(tmp_path / "machine"), "KUBELAB_PIPELINE_CRASH": "after-submit:1"}
    try:
        with JupyterServer(root, home, env=env) as first:
            pipeline_id = first.post("pipelines", {"spec": two_steps(), "params": {"n": 2}}).json()["id"]
            pipelines = Pipelines(Experiments(home))
            wait_driver_gone(pipelines, pipeline_id)  # the driver died right after its first submit
            assert first.process is not None
            first.process.send_signal(signal.SIGKILL)
            first.process.wait()
        env["KUBELAB_PIPELINE_CRASH"] = ""
        with JupyterServer(root, home, env=env) as second:
            done = wait_done(second, pipeline_id)
    finally:
        stop_leftovers(home)
    assert done["status"] == "Succeeded", done
    runs = step_runs(home, pipeline_id)
    assert {k: len(v) for k, v in runs.items()} == {"train": 1, "eval": 1}
    assert os.path.exists(home / "pipelines" / pipeline_id / "driver.log")


ENDPOINTS = [
    ("GET", "pipelines"),
    ("POST", "pipelines"),
    ("GET", "pipelines/000000000000"),
    ("POST", "pipelines/000000000000/stop"),
    ("POST", "pipelines/000000000000/resume"),
    ("GET", "schedules"),
    ("POST", "schedules"),
    ("GET", "schedules/000000000000"),
    ("DELETE", "schedules/000000000000"),
    ("POST", "schedules/000000000000/pause"),
    ("POST", "schedules/000000000000/resume"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_requires_authentication(server: JupyterServer, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": "token wrong"}):
        response = requests.request(method, server.api + path, timeout=10, json={}, headers=headers)
        assert response.status_code in (401, 403), (method, path, response.status_code)
