"""Polyaxon documents through the REST API of a real Jupyter server: created as sweeps, refused
with the field and reason (422, never 500), and kept inside the workspace."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_support import stop_leftovers
from jupyter_server_process import JupyterServer

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("compat-rest")
    shutil.copytree(FIXTURES / "polyaxon", base / "workspace" / "polyaxon")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2", "UV_OFFLINE": "1"}
    try:
        with JupyterServer(base / "workspace", base / "home", env=env) as running:
            yield running
    finally:
        stop_leftovers(base / "home")


MATRIX = {
    "version": 1.1,
    "kind": "operation",
    "name": "rest-matrix",
    "matrix": {
        "kind": "grid",
        "params": {"lr": {"kind": "choice", "value": [0.1, 0.2]}},
        "earlyStopping": [{"metric": "loss", "value": -1, "optimization": "minimize"}],
    },
    "component": {
        "inputs": [{"name": "lr", "type": "float"}],
        "run": {
            "kind": "job",
            "container": {
                "command": [
                    "python",
                    "-c",
                    "import sys, kubelab; kubelab.report(loss=float(sys.argv[1]))",
                    "{{ lr }}",
                ]
            },
        },
    },
}


def test_a_v1_matrix_posted_to_sweeps_runs(server: JupyterServer) -> None:
    created = server.post("sweeps", MATRIX)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    deadline = time.monotonic() + 60
    while server.get(f"sweeps/{sweep_id}").json()["status"] == "Running" and time.monotonic() < deadline:
        time.sleep(0.2)
    record = server.get(f"sweeps/{sweep_id}").json()
    assert record["status"] == "Succeeded", record
    assert sorted(t["objective"] for t in record["trials"]) == [0.1, 0.2]


@pytest.mark.parametrize(
    ("body", "path", "reason"),
    [
        (
            {**MATRIX, "pathRef": "../../etc/passwd", "component": None},
            "pathRef",
            "outside the operation's folder",
        ),
        ({"version": 1.1, "kind": "dag", "operations": []}, "kind", "kubelab pipeline run -f"),
        ({**MATRIX, "joins": [{"query": "status:succeeded"}]}, "joins", "left for later"),
        ({"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment"}, "kind", "Katib Experiment"),
    ],
)
def test_refusals_are_422_with_the_field(
    server: JupyterServer, body: dict[str, Any], path: str, reason: str
) -> None:
    refused = server.post("sweeps", body)
    assert refused.status_code == 422, refused.text
    fields = {f["path"]: f["reason"] for f in refused.json()["fields"]}
    assert reason in fields.get(path, ""), fields


def test_a_group_file_submitted_as_an_experiment_points_to_sweeps(server: JupyterServer) -> None:
    refused = server.post("experiments", {"file": "polyaxon/v0_group.yml"})
    assert refused.status_code == 422, refused.text
    assert "this is a sweep" in refused.json()["fields"][0]["reason"]
    accepted = server.post("experiments", {"file": "polyaxon/v1_operation.yml"})
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["params"] == {"lr": 0.01, "epochs": 3}


@pytest.mark.parametrize(
    ("body", "path", "reason"),
    [
        ({"environment": {"requirements": "nowhere.txt"}}, "environment.requirements", "does not exist"),
        ({"environment": {"requirements": "../../etc/passwd"}}, "environment.requirements", "relative"),
        ({"environment": {"packages": ["--index-url=http://x"]}}, "environment.packages", "an option"),
        ({"init": [{"paths": ["../outside"]}]}, "init[0].paths", "relative"),
        ({"init": [{"paths": ["missing"]}]}, "init[0].paths", "does not exist"),
        ({"init": [{"git": {"url": "https://u:pw@example.org/r.git"}}]}, "init[0].git.url", "credential"),
        ({"init": [{"artifacts": {"run": "0000000000zz"}}]}, "init[0].artifacts.run", "no run"),
    ],
)
def test_environment_and_init_refusals_are_422_and_create_nothing(
    server: JupyterServer, body: dict[str, Any], path: str, reason: str
) -> None:
    before = server.get("experiments").json()["total"]
    refused = server.post("experiments", {"command": "python train.py", **body})
    assert refused.status_code == 422, refused.text
    fields = {f["path"]: f["reason"] for f in refused.json()["fields"]}
    assert reason in fields.get(path, ""), fields
    assert "pw" not in refused.text
    assert server.get("experiments").json()["total"] == before


def test_an_unresolvable_package_fails_the_run_and_its_build_log_is_a_replica(server: JupyterServer) -> None:
    created = server.post("experiments", {"command": "true", "environment": ["no-such-package-kubelab"]})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    deadline = time.monotonic() + 60
    while server.get(f"experiments/{run_id}").json()["status"] != "Failed" and time.monotonic() < deadline:
        time.sleep(0.1)
    record = server.get(f"experiments/{run_id}").json()
    assert (
        record["reason"].startswith("environment: error:") and "no-such-package-kubelab" in record["reason"]
    )
    build = server.get(f"experiments/{run_id}/logs?replica=build")
    assert build.status_code == 200 and "uv pip install" in build.text
    assert server.get(f"experiments/{run_id}/logs?replica=builds").status_code == 422
