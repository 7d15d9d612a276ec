"""The REST additions the sidebar uses: spec files by path, run directories the file browser
can open, and output files, through a real Jupyter server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jupyter_server_process import JupyterServer


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, JupyterServer]]:
    """One server whose runs live inside its root (visible), one whose runs live outside."""
    base = tmp_path_factory.mktemp("sidebar-rest")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2"}
    inside = JupyterServer(base / "root", base / "root" / "kubelab-home", env=env)
    outside = JupyterServer(base / "root2", base / "home2", env=env)
    with inside, outside:
        project = inside.root / "project"
        project.mkdir()
        (project / "train.py").write_text(
            "import os, kubelab\nkubelab.report(step=1, loss=0.5)\n"
            "open(os.path.join(os.environ['KUBELAB_OUTPUTS_DIR'], 'model.txt'), 'w').write('weights')\n"
        )
        (project / "spec.yaml").write_text(
            "name: from-yaml\ncommand: [python, train.py]\nparams: {lr: 0.1}\n"
        )
        (project / "typo.yaml").write_text("name: t\ncomand: [python, train.py]\n")
        (project / "broken.yaml").write_text("name: [unclosed\n")
        (outside.root / "train.py").write_text((project / "train.py").read_text())
        yield inside, outside


def test_a_spec_file_runs_with_paths_from_its_folder(servers: tuple[JupyterServer, JupyterServer]) -> None:
    inside, _ = servers
    response = inside.post("experiments?cwd=project", {"file": "spec.yaml"})
    assert response.status_code == 201, response.text
    record = inside.wait_for(response.json()["id"])
    assert record["status"] == "Succeeded" and record["name"] == "from-yaml"
    assert record["params"] == {"lr": 0.1} and record["metrics"] == {"loss": 0.5}
    # From the root the file is named by its path; its command still runs in its folder.
    again = inside.post("experiments", {"file": "project/spec.yaml"})
    assert again.status_code == 201, again.text
    assert inside.wait_for(again.json()["id"])["spec"]["workdir"].endswith("project")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"file": "nope.yaml"}, "no such file"),
        ({"file": "../../etc/passwd"}, "is outside the workspace"),
        ({"file": ""}, "must be a path to a spec file"),
        ({"file": "spec.yaml", "name": "x"}, "cannot be combined with name"),
        ({"file": "broken.yaml"}, "line 2"),
    ],
)
def test_bad_spec_files_are_refused_naming_the_file(
    servers: tuple[JupyterServer, JupyterServer], body: dict[str, Any], reason: str
) -> None:
    inside, _ = servers
    before = inside.get("experiments").json()["total"]
    response = inside.post("experiments?cwd=project", body)
    assert response.status_code == 422, response.text
    field = response.json()["fields"][0]
    assert field["path"] == "file" and reason in field["reason"]
    assert inside.get("experiments").json()["total"] == before


def test_a_spec_file_with_a_typo_names_the_field(servers: tuple[JupyterServer, JupyterServer]) -> None:
    inside, _ = servers
    response = inside.post("experiments?cwd=project", {"file": "typo.yaml"})
    assert response.status_code == 422
    assert any(f["path"] == "comand" and "command" in f["reason"] for f in response.json()["fields"])


def test_run_dir_relative_and_outputs(servers: tuple[JupyterServer, JupyterServer]) -> None:
    inside, outside = servers
    run_id = inside.post("experiments?cwd=project", {"command": ["python", "train.py"]}).json()["id"]
    inside.wait_for(run_id)
    record = inside.get(f"experiments/{run_id}").json()
    assert record["run_dir_relative"] == f"kubelab-home/runs/{run_id}"
    assert record["outputs"] == [{"path": "model.txt", "size": 7}]
    output = inside.get(f"experiments/{run_id}/outputs/model.txt")
    assert output.status_code == 200 and output.content == b"weights"

    other = outside.post("experiments", {"command": ["python", "train.py"]}).json()["id"]
    outside.wait_for(other)
    record = outside.get(f"experiments/{other}").json()
    assert record["run_dir_relative"] is None  # outside the root: the file browser cannot open it
    assert outside.get(f"experiments/{other}/outputs/model.txt").content == b"weights"


def test_output_paths_stay_inside_outputs(servers: tuple[JupyterServer, JupyterServer]) -> None:
    inside, _ = servers
    run_id = inside.get("experiments").json()["items"][0]["id"]
    for path in ("missing.txt", "%2e%2e/status.json", "sub/%2e%2e/%2e%2e/spec.json"):
        response = inside.get(f"experiments/{run_id}/outputs/{path}")
        assert response.status_code == 404, path
        assert response.json()["fields"][0]["path"] == "path"
    assert inside.get("experiments/000000000000/outputs/x").status_code == 404
