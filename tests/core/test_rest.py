"""The REST API through a real Jupyter server with the kubelab extension."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer, run_in_kernel


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("rest")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2"}
    with JupyterServer(base / "root", base / "home", env=env) as running:
        (running.root / "project").mkdir()
        (running.root / "project" / "train.py").write_text(
            "import kubelab\nfor s in range(3):\n    kubelab.report(step=s, loss=1/(s+1))\nprint('trained')\n"
        )
        yield running


ENDPOINTS = [
    ("GET", "experiments"),
    ("POST", "experiments"),
    ("GET", "experiments/000000000000"),
    ("DELETE", "experiments/000000000000"),
    ("POST", "experiments/000000000000/stop"),
    ("GET", "experiments/000000000000/logs"),
    ("GET", "experiments/000000000000/metrics"),
    ("GET", "experiments/000000000000/system"),
    ("GET", "resources"),
    ("GET", "resources/preview"),
    ("GET", "usage"),
    ("GET", "events"),
    ("GET", "openapi.json"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_every_endpoint_requires_authentication(server: JupyterServer, method: str, path: str) -> None:
    response = requests.request(method, server.api + path, timeout=10, json={})
    assert response.status_code in (401, 403)
    wrong = requests.request(
        method, server.api + path, timeout=10, json={}, headers={"Authorization": "token wrong"}
    )
    assert wrong.status_code in (401, 403)


def test_openapi_describes_every_route(server: JupyterServer) -> None:
    document = server.get("openapi.json").json()
    assert document["openapi"].startswith("3.")
    paths = set(document["paths"])
    for _method, path in ENDPOINTS:
        template = "/kubelab/api/" + path.replace("000000000000", "{run_id}")
        assert template in paths
    assert "post" in document["paths"]["/kubelab/api/experiments"]
    for resource in ("sweeps", "sweeps/{sweep_id}", "tensorboards"):
        assert f"/kubelab/api/{resource}" in paths, resource


def test_submit_run_and_read_back(server: JupyterServer) -> None:
    response = server.post("experiments?cwd=project", {"name": "rest", "command": ["python", "train.py"]})
    assert response.status_code == 201, response.text
    run_id = response.json()["id"]
    final = server.wait_for(run_id)
    assert final["status"] == "Succeeded" and final["metrics"] == {"loss": 1 / 3}
    assert final["spec"]["workdir"].endswith("project")
    listed = server.get("experiments", params={"query": "status:succeeded, name:rest"}).json()
    assert run_id in [item["id"] for item in listed["items"]] and listed["total"] >= 1
    assert "trained" in server.get(f"experiments/{run_id}/logs").text
    points = server.get(f"experiments/{run_id}/metrics").json()["points"]
    assert [p["step"] for p in points] == [0, 1, 2]


def test_system_metrics_are_read_as_sums_and_bucketed_series(server: JupyterServer) -> None:
    response = server.post("experiments?cwd=project", {"name": "sys", "command": ["python", "train.py"]})
    run_id = response.json()["id"]
    final = server.wait_for(run_id)
    samples = [
        {"time": 1000 + 5 * i, "gpus": [{"index": 0, "util": 90 if i % 2 else 70, "power_w": 200}]}
        for i in range(10)
    ]
    recorded = Path(final["run_dir"]) / "recorded.jsonl"  # replaces the run's own samples whole
    recorded.write_text(
        '{"sources": {"gpu": "nvml"}, "missing": {"process": "psutil is not installed"}}\n'
        + "".join(json.dumps(s) + "\n" for s in samples)
    )
    recorded.replace(recorded.with_name("system.jsonl"))
    read = server.get(f"experiments/{run_id}/system", params={"points": 5}).json()
    assert read["summary"]["gpu_util"] == 80.0 and read["summary"]["energy_wh"] == 200 * 45 / 3600
    assert read["summary"]["missing"] == {"process": "psutil is not installed"}
    (gpu,) = read["series"]["gpus"]
    assert len(read["series"]["time"]) == 5 and gpu["util"] == [80.0] * 5 and gpu["memory_mib"] == [None] * 5
    for bad in ("0", "lots", "5001"):
        refused = server.get(f"experiments/{run_id}/system", params={"points": bad})
        assert refused.status_code == 422 and refused.json()["fields"][0]["path"] == "points"


def test_validation_errors_are_json_with_fields_and_change_nothing(server: JupyterServer) -> None:
    before = server.get("experiments").json()["total"]
    response = server.post("experiments", {"comand": "x", "resources": {"gpus": -1}})
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "invalid" and body["detail"] == "invalid experiment spec"
    assert {"path": "resources.gpus", "reason": "must be 0 or more, not -1"} in body["fields"]
    assert any(f["path"] == "comand" and "did you mean 'command'" in f["reason"] for f in body["fields"])
    assert server.get("experiments").json()["total"] == before


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("experiments", {"command": "true", "workdir": "../.."}, 422, "workdir"),
        ("experiments", {"command": "true", "code": "/etc"}, 422, "code.path"),
        ("experiments?cwd=../..", {"command": "true"}, 422, "cwd"),
        ("experiments?cwd=missing", {"command": "true"}, 422, "cwd"),
        ("experiments", "not json", 422, "body"),
    ],
)
def test_paths_from_requests_never_escape_the_workspace(
    server: JupyterServer, path: str, body: str | dict[str, Any], status: int, field: str
) -> None:
    if body == "not json":
        response = requests.post(server.api + path, data="{nope", headers=server.headers, timeout=10)
    else:
        response = server.post(path, body)
    assert response.status_code == status
    assert response.json()["fields"][0]["path"] == field


def test_not_found_and_bad_arguments(server: JupyterServer) -> None:
    missing = server.get("experiments/000000000000")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert server.get("experiments/..%2f..%2fetc").status_code == 404
    bad_limit = server.get("experiments", params={"limit": "many"})
    assert bad_limit.status_code == 422 and bad_limit.json()["fields"][0]["path"] == "limit"
    bad_query = server.get("experiments", params={"query": "status:"})
    assert bad_query.status_code == 422 and bad_query.json()["fields"][0]["path"] == "query"


def test_stop_delete_and_log_follow(server: JupyterServer) -> None:
    run_id = server.post("experiments", {"command": "echo begin; sleep 30"}).json()["id"]
    server.wait_for(run_id, states=("Running",))
    chunks: list[str] = []

    def follow() -> None:
        with requests.get(
            server.api + f"experiments/{run_id}/logs",
            params={"follow": 1},
            headers=server.headers,
            stream=True,
            timeout=60,
        ) as response:
            for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                chunks.append(chunk)

    reader = threading.Thread(target=follow)
    reader.start()
    deadline = time.monotonic() + 20
    while "begin" not in "".join(chunks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.post(f"experiments/{run_id}/stop").status_code == 200
    assert server.wait_for(run_id)["status"] == "Stopped"
    reader.join(timeout=20)
    assert not reader.is_alive(), "log follow did not end with the run"
    assert server.delete(f"experiments/{run_id}").status_code == 204
    assert server.get(f"experiments/{run_id}").status_code == 404


def test_event_stream_carries_state_and_metric_changes(server: JupyterServer) -> None:
    events: list[tuple[str | None, dict[str, Any]]] = []
    connected = threading.Event()

    def listen() -> None:
        with requests.get(server.api + "events", headers=server.headers, stream=True, timeout=60) as response:
            kind = None
            for line in response.iter_lines(decode_unicode=True):
                if line.startswith(": connected"):
                    connected.set()
                elif line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    events.append((kind, json.loads(line[6:])))
                    if kind == "experiment" and events[-1][1]["status"] == "Succeeded":
                        return

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert connected.wait(20)
    script = "import kubelab, time\nfor s in range(3):\n    kubelab.report(step=s, acc=s / 2)\n    time.sleep(0.3)\n"
    run_id = server.post("experiments", {"code": {"source": script}}).json()["id"]
    listener.join(timeout=60)
    mine = [(k, d) for k, d in events if d.get("id") == run_id]
    states = [d["status"] for k, d in mine if k == "experiment"]
    assert states[0] == "Pending" and states[-1] == "Succeeded" and "Running" in states
    steps = [p["step"] for k, d in mine if k == "metrics" for p in d["points"]]
    assert steps == [0, 1, 2]


def test_kernels_get_an_address_and_token_for_the_api(server: JupyterServer) -> None:
    code = (
        "import os, json, urllib.request\n"
        "req = urllib.request.Request(os.environ['KUBELAB_API_URL'] + '/resources',\n"
        "    headers={'Authorization': 'token ' + os.environ['KUBELAB_API_TOKEN']})\n"
        "print(json.load(urllib.request.urlopen(req))['backend'])\n"
    )
    assert run_in_kernel(server, code).strip() == "local"


def test_resources(server: JupyterServer) -> None:
    info = server.get("resources").json()
    assert info["backend"] == "local" and info["gpus"]["total"] == 0
