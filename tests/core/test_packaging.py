"""The wheel carries everything a user needs: no node, no extra enable step."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    if not (ROOT / "kubelab" / "labextension" / "package.json").exists():
        pytest.fail("the JupyterLab extension is not built: run scripts/setup")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        cwd=out,
    )
    (path,) = out.glob("kubelab-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_holds_modules_extension_and_config(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    data = next(n.split("/")[0] for n in names if ".data/" in n)
    folders = {
        "kubelab": "kubelab",
        "spawner": "kubelab/spawner",
        "server_extension": "kubelab/server_extension",
        "magics": "kubelab/magics",
        "hub_config": "kubelab/hub_config",
    }
    for folder, package in folders.items():
        for source in (ROOT / folder).rglob("*"):
            if source.is_dir() or "__pycache__" in source.parts:
                continue
            if "labextension" in source.parts:
                continue
            inside = f"{package}/{source.relative_to(ROOT / folder).as_posix()}"
            assert inside in names, f"{inside} is missing from the wheel: list its package in pyproject.toml"
    assert f"{data}/data/etc/jupyter/jupyter_server_config.d/kubelab.json" in names
    assert f"{data}/data/share/jupyter/labextensions/kubelab/package.json" in names
    assert any(
        n.startswith(f"{data}/data/share/jupyter/labextensions/kubelab/static/remoteEntry.") for n in names
    )
    assert not any("/tests/" in n or n.startswith("tests/") for n in names)


def test_jupyter_lists_kubelab_as_enabled() -> None:
    servers = subprocess.run(["jupyter", "server", "extension", "list"], capture_output=True, text=True)
    assert "kubelab.server_extension" in servers.stderr + servers.stdout
    assert "OK" in (servers.stderr + servers.stdout).split("kubelab.server_extension", 1)[1][:200]
    labs = subprocess.run(["jupyter", "labextension", "list"], capture_output=True, text=True)
    listing = labs.stdout + labs.stderr
    assert "kubelab" in listing and "enabled" in listing.split("kubelab", 1)[1][:120]
