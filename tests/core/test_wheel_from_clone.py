"""`pip wheel .` from a clean clone builds the JupyterLab extension itself (setup.py's hook):
nobody has to run jlpm by hand first, and the wheel carries the sidebar."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = "share/jupyter/labextensions/kubelab"


@pytest.mark.slow
def test_wheel_from_a_clean_clone_contains_the_lab_extension(tmp_path: Path) -> None:
    clone, out = tmp_path / "clone", tmp_path / "wheel"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    assert not (clone / "kubelab" / "labextension").exists()  # git-ignored: never committed
    # The build requirements (setuptools, jupyter-builder) are those of this environment.
    done = subprocess.run(
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
            str(clone),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("kubelab-*.whl")
    with zipfile.ZipFile(path) as wheel:
        names = set(wheel.namelist())
        data = next(n.split("/")[0] for n in names if ".data/" in n)
        prefix = f"{data}/data/{INSTALLED}/"
        manifest = json.loads(wheel.read(prefix + "package.json"))
        built = {n[len(prefix) :] for n in names if n.startswith(prefix)}
    assert manifest["name"] == "kubelab"
    entry = manifest["jupyterlab"]["_build"]["load"]  # what JupyterLab loads first
    assert entry in built and entry.startswith("static/remoteEntry.")
    assert "schemas/kubelab/plugin.json" in built
    # every file the build wrote is installed, and nothing else
    output = clone / "kubelab" / "labextension"
    assert built == {p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file()}
