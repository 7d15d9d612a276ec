"""Tiny wheels written here, so environment builds in tests install from a local folder, offline."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def make_wheel(
    folder: Path, name: str, version: str = "1.0", requires: tuple[str, ...] = (), module: str | None = None
) -> Path:
    """`name-version-py3-none-any.whl` with one module (`module`, else the name) whose `VERSION`
    is `version`: a stand-in with a real package's name, for builds that must stay offline."""
    module = module or name.replace("-", "_")
    dist_name = name.replace("-", "_")
    dist = f"{dist_name}-{version}"
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}.dist-info/METADATA": "\n".join(
            ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
            + [f"Requires-Dist: {r}" for r in requires]
        )
        + "\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: kubelab-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    files[f"{dist}.dist-info/RECORD"] = "\n".join(record) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel
