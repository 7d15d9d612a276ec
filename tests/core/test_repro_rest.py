"""Diff, reopen and notes over REST, through a real Jupyter server with the kubelab extension."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_server_process import JupyterServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("repro-rest")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2"}
    with JupyterServer(base / "root", base / "home", env=env) as running:
        project = running.root / "project"
        project.mkdir(parents=True)
        (project / "train.py").write_text("import kubelab\nkubelab.report(loss=kubelab.params()['lr'])\n")
        yield running


def start(server: JupyterServer, lr: float) -> dict[str, Any]:
    spec = {"command": ["python", "train.py"], "code": {"path": "."}, "params": {"lr": lr}}
    response = server.post("experiments?cwd=project", spec)
    assert response.status_code == 201, response.text
    record: dict[str, Any] = server.wait_for(response.json()["id"])
    assert record["status"] == "Succeeded", record
    return record


def listed(server: JupyterServer, query: str) -> list[str]:
    return [r["id"] for r in server.get("experiments", params={"query": query}).json()["items"]]


def test_diff_over_rest(server: JupyterServer) -> None:
    a, b = start(server, 0.5), start(server, 0.25)
    diff = server.get("diff", params={"a": a["id"], "b": b["id"]}).json()
    assert diff["params"] == [{"name": "lr", "a": 0.5, "b": 0.25}]
    assert diff["environment"]["python"]["a"] == diff["environment"]["python"]["b"]
    assert diff["code"] == []
    missing = server.get("diff", params={"a": a["id"]})
    assert missing.status_code == 422 and missing.json()["fields"][0]["path"] == "b"
    unknown = server.get("diff", params={"a": a["id"], "b": "000000000000"})
    assert unknown.status_code == 404


def test_reopen_over_rest_stays_in_the_workspace_and_records_the_parent(server: JupyterServer) -> None:
    first = start(server, 0.75)
    made = server.post(f"experiments/{first['id']}/reopen?cwd=project", {"dest": "again"})
    assert made.status_code == 201, made.text
    assert made.json()["dest"] == "project/again"
    assert (server.root / "project" / "again" / "train.py").exists()
    child = server.post("experiments?cwd=project/again", {"file": "kubelab-run.yaml"})
    assert child.status_code == 201, child.text
    record = server.wait_for(child.json()["id"])
    assert record["parent"] == first["id"] and record["metrics"] == {"loss": 0.75}
    assert listed(server, f"parent:{first['id']}") == [record["id"]]

    outside = server.post(f"experiments/{first['id']}/reopen?cwd=project", {"dest": "../../elsewhere"})
    assert outside.status_code == 422 and outside.json()["fields"][0]["path"] == "dest"
    assert not (server.root.parent / "elsewhere").exists()
    taken = server.post(f"experiments/{first['id']}/reopen?cwd=project", {"dest": "again"})
    assert taken.status_code == 422 and "not an empty folder" in taken.text
    for body in ({}, {"dest": 3}, [1]):
        bad = server.post(f"experiments/{first['id']}/reopen", body)
        assert bad.status_code == 422 and bad.json()["fields"][0]["path"] == "dest", body


def test_notes_over_rest_and_from_the_cli_reach_the_servers_listing(server: JupyterServer) -> None:
    run = start(server, 0.1)
    assert listed(server, "tags:best") == []  # the server's index holds the run as finished
    edited = server.post(f"experiments/{run['id']}/notes", {"add": ["best", "x"], "note": "keep"})
    assert edited.status_code == 200, edited.text
    assert edited.json()["tags"] == ["best", "x"] and edited.json()["note"] == "keep"
    assert listed(server, "tags:best") == [run["id"]]

    # Another process (the CLI) edits the same finished run: the server's index hears of it.
    env = {**os.environ, "KUBELAB_HOME": str(server.home)}
    command = [sys.executable, "-m", "kubelab.cli", "tag", run["id"], "-best", "+chosen"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)
    deadline = time.monotonic() + 30
    while listed(server, "tags:chosen") != [run["id"]]:
        assert time.monotonic() < deadline, "the CLI's tag never reached the server's listing"
        time.sleep(0.1)
    assert listed(server, "tags:best") == []

    before = server.get(f"experiments/{run['id']}").json()
    for body, field in (
        ({"add": "best"}, "add"),
        ({"add": ["two words"]}, "tags"),
        ({"note": 5}, "note"),
        ({"colour": "red"}, "colour"),
        (["best"], "body"),
    ):
        bad = server.post(f"experiments/{run['id']}/notes", body)
        assert bad.status_code == 422, (body, bad.text)
        assert bad.json()["fields"][0]["path"] == field, body
    after = server.get(f"experiments/{run['id']}").json()
    assert (after["tags"], after["note"]) == (before["tags"], before["note"])
    assert json.loads(json.dumps(after["tags"])) == ["x", "chosen"]


def test_a_stopped_run_is_resumed_over_rest_and_anything_else_refused(server: JupyterServer) -> None:
    project = server.root / "project"
    (project / "wait.py").write_text(
        "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\nprint('went')\n"
    )
    made = server.post("experiments?cwd=project", {"command": ["python", "wait.py"]})
    assert made.status_code == 201, made.text
    run_id = made.json()["id"]
    server.wait_for(run_id, states={"Running"})
    assert server.post(f"experiments/{run_id}/stop").status_code == 200
    assert server.wait_for(run_id)["status"] == "Stopped"

    resumed = server.post(f"experiments/{run_id}/resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["reason"] == "resumed from the start (no checkpoint)"
    again = server.post(f"experiments/{run_id}/resume")
    assert again.status_code == 409 and again.json()["fields"][0]["path"] == "status", again.text
    server.wait_for(run_id, states={"Running"})
    (project / "go").touch()
    assert server.wait_for(run_id)["status"] == "Succeeded"
    assert server.post("experiments/000000000000/resume").status_code == 404
