"""The build hook: a wheel (or `pip install .`) from a clean clone builds the lab extension.

Everything else about the package is declared in pyproject.toml. The JupyterLab extension is
TypeScript compiled into `kubelab/labextension/` (git-ignored), so before the Python files
are collected the hook runs `jlpm install --immutable` and `jlpm build:prod` (jlpm ships
with jupyter-builder, a build requirement; node must be on PATH) unless that output is newer
than its sources, then adds the built files to the data files JupyterLab finds in
`share/jupyter/labextensions/kubelab`. `KUBELAB_SKIP_LABEXTENSION=1` skips the build (the
wheel then has no sidebar).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
OUTPUT = ROOT / "kubelab" / "labextension"
SOURCES = ("labextension/src", "labextension/style", "labextension/schema", "package.json", "yarn.lock")
INSTALLED = "share/jupyter/labextensions/kubelab"
# jlpm (JupyterLab's pinned yarn) ships in jupyter-builder, a build requirement; older JupyterLabs
# carried it themselves.
JLPM = [
    sys.executable,
    "-c",
    "try:\n from jupyter_builder.jlpm import main\nexcept ImportError:\n"
    " from jupyterlab.jlpmapp import main\nimport sys; sys.exit(main())",
]


def _stale() -> bool:
    built = OUTPUT / "package.json"
    if not built.exists():
        return True
    stamp = built.stat().st_mtime
    for name in SOURCES:
        source = ROOT / name
        paths = source.rglob("*") if source.is_dir() else [source]
        if any(p.is_file() and p.stat().st_mtime > stamp for p in paths):
            return True
    return False


def build_labextension() -> None:
    if os.environ.get("KUBELAB_SKIP_LABEXTENSION") == "1" or not (ROOT / "package.json").exists():
        return  # a build from an sdist without the TypeScript sources, or asked not to
    if _stale():
        print("kubelab: building the JupyterLab extension (jlpm)", flush=True)
        subprocess.run([*JLPM, "install", "--immutable"], cwd=ROOT, check=True)
        subprocess.run([*JLPM, "build:prod"], cwd=ROOT, check=True)


def labextension_data_files() -> list[tuple[str, list[str]]]:
    """The built extension's files, grouped by the folder they install into."""
    groups: dict[str, list[str]] = {}
    for path in sorted(OUTPUT.rglob("*")):
        if path.is_file():
            folder = path.parent.relative_to(OUTPUT).as_posix()
            target = INSTALLED if folder == "." else f"{INSTALLED}/{folder}"
            groups.setdefault(target, []).append(path.relative_to(ROOT).as_posix())
    return sorted(groups.items())


class BuildWithLabExtension(build_py):
    """`build_py` that first builds the lab extension and lists its files for `install_data`."""

    def run(self) -> None:
        if not self.editable_mode:  # editable installs link the folder (scripts/setup)
            build_labextension()
            files = self.distribution.data_files
            if files is None:
                files = self.distribution.data_files = []
            present = {target for target, _ in files}
            files.extend(group for group in labextension_data_files() if group[0] not in present)
        super().run()


setup(cmdclass={"build_py": BuildWithLabExtension})
