"""A Python every account on this machine can run, with this checkout's kubelab in it.

A root hub runs each notebook as its user, so the interpreter and kubelab must be reachable by
them; the test virtualenv's Python often is not (it may live under `/root`). This makes a
virtualenv from the system's own Python in a folder open to everyone (`0755` all the way) and
points it at the test virtualenv's packages (this checkout, editable, and its dependencies,
with its `share/jupyter` and `etc/jupyter`: the built labextension, the server extensions), so nothing is installed twice.
It is skipped, with the reason, where that cannot work (another Python version, a closed path).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from kubelab.spawner.preflight import closed_to_others

SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def _system_python() -> Path:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in SYSTEM_PYTHONS:
        path = Path(candidate)
        if not path.exists() or closed_to_others(path) is not None:
            continue
        found = subprocess.run(
            [str(path), "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
            capture_output=True,
            text=True,
        )
        if found.stdout.strip() == version:
            return path
    pytest.skip(f"no Python {version} every user can run (looked at {', '.join(SYSTEM_PYTHONS)})")


def world_python(base: Path | None = None) -> Path:
    """The interpreter of a new virtualenv under `base` (a new temporary folder by default)."""
    packages = Path(sysconfig.get_paths()["purelib"])
    for needed in (packages, Path(__file__).resolve().parents[1] / "kubelab"):
        closed = closed_to_others(needed)
        if closed is not None:
            pytest.skip(f"{closed} is closed to other users, so they cannot import {needed}")
    folder = Path(base or tempfile.mkdtemp(prefix="kubelab-world-python-"))
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    venv = folder / "venv"
    subprocess.run(
        [str(_system_python()), "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True
    )
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / version / "site-packages" / "kubelab-checkout.pth").write_text(
        f"import site; site.addsitedir({str(packages)!r})\n"  # processes that folder's .pth (the editable install)
    )
    for part in ("share", "etc"):  # labextensions, and the config enabling JupyterLab and kubelab
        shared = Path(sys.prefix) / part / "jupyter"
        if shared.is_dir():
            (venv / part).mkdir(exist_ok=True)
            (venv / part / "jupyter").symlink_to(shared, target_is_directory=True)
    python = venv / "bin" / "python"
    closed = closed_to_others(python)
    assert closed is None, f"{closed} is closed to other users"
    return python


def remove(python: Path) -> None:
    shutil.rmtree(python.parents[2], ignore_errors=True)
