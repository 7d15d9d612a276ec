"""JupyterLab or VS Code: the form's choice, its validation, and what each spawner gives the server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kubelab.errors import ValidationError
from kubelab.spawner import interfaces
from kubelab.spawner.cli import render
from kubelab.spawner.form import render_form
from kubelab.spawner.profiles import Catalog, validate_options

REPO = Path(__file__).resolve().parents[2]
CATALOG = Catalog.parse({"images": ["lab/pytorch:2"]})


def test_the_form_offers_both_and_keeps_the_last_choice() -> None:
    form = render_form(CATALOG, [], None, {"interface": "vscode"})
    assert 'name="interface"' in form and '<option value="vscode" selected>VS Code</option>' in form
    assert '<option value="lab">JupyterLab</option>' in form


def test_an_unknown_interface_is_refused_by_name() -> None:
    assert validate_options({}, CATALOG).interface == "lab"
    assert validate_options({"interface": "vscode"}, CATALOG).to_user_options()["interface"] == "vscode"
    with pytest.raises(ValidationError) as refused:
        validate_options({"interface": "emacs"}, CATALOG)
    assert [(f.path, f.reason) for f in refused.value.fields] == [
        ("interface", "must be one of lab, vscode, not 'emacs'")
    ]


def test_kubelab_and_code_server_come_first_on_the_path() -> None:
    path = interfaces.path_with(
        ["/opt/kubelab/bin", "", "/opt/code/bin"], f"/usr/bin{os.pathsep}/opt/kubelab/bin"
    )
    assert path.split(os.pathsep) == ["/opt/kubelab/bin", "/opt/code/bin", "/usr/bin"]
    assert interfaces.vscode_env("lab", "/mnt/alice") == {}


def test_a_vscode_pod_opens_on_the_workspace(tmp_path: Path) -> None:
    config = tmp_path / "jupyterhub_config.py"
    config.write_text((REPO / "hub_config" / "jupyterhub_config.py").read_text())
    spawned = render("alice", [], {"interface": "vscode"}, config)
    pod = next(o for o in spawned if o["kind"] == "Pod")
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["CODE_WORKINGDIR"] == "/mnt/alice" and env["JUPYTER_VSCODE_PROXY_USE_SOCKET"] == "1"
    assert env["JUPYTERHUB_DEFAULT_URL"] == "/vscode/"
    lab = next(o for o in render("alice", [], {}, config) if o["kind"] == "Pod")
    assert "CODE_WORKINGDIR" not in {e["name"] for e in lab["spec"]["containers"][0]["env"]}
