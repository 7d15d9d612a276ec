"""Every REST handler asks Jupyter's Authorizer, with a resource name and the right action.

A deployment can give a user read-only access (JupyterHub's `read:servers`-style scopes, or
a custom `Authorizer`): then nothing under `/kubelab/api/` may change or run anything.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_server_process import JupyterServer

HERE = Path(__file__).resolve().parent


def start(base: Path, authorizer: str) -> JupyterServer:
    env = {
        "KUBELAB_MACHINE_DIR": str(base / "machine"),
        "PYTHONPATH": str(HERE),
        "KUBELAB_AUTHZ_LOG": str(base / "authz.jsonl"),
    }
    server = JupyterServer(
        base / "root",
        base / "home",
        env=env,
        extra=[f"--ServerApp.authorizer_class=kubelab_authorizers.{authorizer}"],
    )
    return server.start()


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, Path]]:
    base = tmp_path_factory.mktemp("readonly")
    server = start(base, "ReadOnly")
    yield server, base
    server.stop()


WRITES = [
    ("POST", "experiments"),
    ("DELETE", "experiments/000000000000"),
    ("POST", "experiments/000000000000/stop"),
    ("POST", "experiments/000000000000/resume"),
    ("POST", "sweeps"),
    ("PATCH", "sweeps/000000000000"),
    ("POST", "sweeps/000000000000/stop"),
    ("POST", "sweeps/000000000000/resume"),
    ("POST", "tensorboards"),
    ("DELETE", "tensorboards/000000000000"),
    ("POST", "pipelines"),
    ("POST", "pipelines/000000000000/stop"),
    ("POST", "pipelines/000000000000/resume"),
    ("POST", "schedules"),
    ("DELETE", "schedules/000000000000"),
    ("POST", "schedules/000000000000/pause"),
    ("POST", "schedules/000000000000/resume"),
    ("POST", "services"),
    ("DELETE", "services/iris-v1"),
    ("POST", "services/iris-v1/stop"),
    ("POST", "services/iris/traffic"),
]


def test_every_route_method_names_its_action() -> None:
    """The route table, read as the server reads it: no handler method answers unasked."""
    from kubelab.server_extension.routes import API_ROUTES

    checked = 0
    for pattern, handler in API_ROUTES:
        for verb in ("get", "post", "put", "patch", "delete"):
            method = getattr(handler, verb, None)
            if method is None or method.__qualname__.startswith(
                ("RequestHandler.", "APIHandler.", "JupyterHandler.")
            ):
                continue
            assert getattr(method, "kubelab_action", None) in ("read", "write", "execute"), (
                pattern,
                handler.__name__,
                verb,
            )
            checked += 1
    assert checked >= 30  # experiments, sweeps, pipelines, schedules, TensorBoard, events…


def test_a_read_only_user_cannot_run_an_experiment(read_only: tuple[JupyterServer, Path]) -> None:
    server, base = read_only
    marker = base / "ran"
    spec = {"name": "x", "command": ["python", "-c", f"open({str(marker)!r}, 'w').write('ran')"]}
    response = server.post("experiments", spec)
    assert response.status_code == 403, response.text
    time.sleep(1.0)  # had it been submitted, the runner would have had time to start it
    assert not marker.exists()
    listed = server.get("experiments")
    assert listed.status_code == 200 and listed.json()["total"] == 0
    assert not list((base / "home").glob("runs/*"))  # no run directory was made


@pytest.mark.parametrize(("method", "path"), WRITES)
def test_a_read_only_user_changes_nothing(
    read_only: tuple[JupyterServer, Path], method: str, path: str
) -> None:
    server, _ = read_only
    import requests

    response = requests.request(method, server.api + path, headers=server.headers, json={}, timeout=30)
    assert response.status_code == 403, (method, path, response.status_code, response.text[:300])


def test_reads_ask_for_read_and_anything_that_runs_code_asks_for_execute(
    read_only: tuple[JupyterServer, Path],
) -> None:
    server, base = read_only
    for path in ("experiments", "resources", "sweeps", "tensorboards", "openapi.json"):
        assert server.get(path).status_code == 200, path
    server.post("experiments", {"command": ["true"]})
    server.post("sweeps", {})
    server.post("tensorboards", {})
    server.post("experiments/000000000000/stop")
    server.post("pipelines", {})
    server.post("schedules/000000000000/pause")
    server.post("services", {})
    server.post("services/iris/traffic", {"traffic": {"2": 10}})
    asked = [json.loads(line) for line in (base / "authz.jsonl").read_text().splitlines()]
    decisions = {
        (method, path.split("/kubelab/api/")[1]): (action, resource)
        for method, path, action, resource in asked
    }
    assert decisions[("GET", "experiments")] == ("read", "kubelab.experiments")
    assert decisions[("GET", "resources")] == ("read", "kubelab.resources")
    assert decisions[("POST", "experiments")] == ("execute", "kubelab.experiments")
    assert decisions[("POST", "sweeps")] == ("execute", "kubelab.sweeps")
    assert decisions[("POST", "tensorboards")] == ("execute", "kubelab.tensorboards")
    assert decisions[("POST", "experiments/000000000000/stop")] == ("write", "kubelab.experiments")
    assert decisions[("POST", "pipelines")] == ("execute", "kubelab.pipelines")
    assert decisions[("POST", "schedules/000000000000/pause")] == ("write", "kubelab.schedules")
    assert decisions[("POST", "services")] == ("execute", "kubelab.services")
    assert decisions[("POST", "services/iris/traffic")] == ("execute", "kubelab.services")


def test_changing_without_running_code_is_a_write(tmp_path: Path) -> None:
    server = start(tmp_path, "NoExecute")
    try:
        assert server.post("experiments", {"command": ["true"]}).status_code == 403
        assert server.post("experiments/000000000000/stop").status_code == 404  # allowed, no such run
    finally:
        server.stop()


def test_a_read_only_user_cannot_call_a_service_through_the_proxy(
    read_only: tuple[JupyterServer, Path],
) -> None:
    server, _ = read_only
    import requests

    answer = requests.post(
        server.url + "kubelab/services/iris-v1/v2/models/iris/infer",
        headers=server.headers,
        json={},
        timeout=30,
    )
    assert answer.status_code == 403  # a prediction (or a service's form) is an `execute`
    assert server.page("kubelab/services/iris-v1/").status_code == 404  # reading is allowed: no such service
