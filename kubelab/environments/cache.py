"""The user's built environments: `$KUBELAB_HOME/envs/<key>/`, one virtualenv per content hash.

A build runs once per key: builders take `<key>.lock` (`flock`), so runs and trials that start
together with a new environment wait for the first one's build instead of racing it, then find
`ready` written last. A folder without `ready` is a build that was cut short: the next builder
starts it over. Environments are never rebuilt in place: a changed definition is a new key,
and runs that used the old one keep it until `kubelab env rm`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

READY = "ready"
VENV = "venv"
KEY = re.compile(r"^[0-9a-f]{16}$")


class BuildFailed(Exception):
    """The build's failing line, already clear of credentials: the run's reason."""


def uv_binary() -> str:
    """The `uv` the PyPI package ships (a dependency of kubelab), else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if not found:
            raise BuildFailed("uv is not installed: pip install uv") from None
        return found


def conda_binary() -> str | None:
    return shutil.which("micromamba") or shutil.which("mamba") or shutil.which("conda")


def redact(text: str) -> str:
    """Addresses with a user or password lose them: `https://***@host/...`."""
    return re.sub(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@", r"\1***@", text)


def failing_line(log: str) -> str:
    """uv's `error:` line and its first cause, or the last line that says anything."""
    lines = [line.strip().lstrip("×╰─▶│ ").strip() for line in log.splitlines()]
    lines = [line for line in lines if line and not line.startswith("kubelab:")]
    for index, line in enumerate(lines):
        if line.lower().startswith(("error:", "fatal:")):
            cause = lines[index + 1] if index + 1 < len(lines) else ""
            more = f" ({cause.removeprefix('cause: ')})" if cause.startswith(("cause:", "Because")) else ""
            return redact(line + more)
    return redact(lines[-1]) if lines else "the build failed without a message"


class EnvironmentCache:
    def __init__(self, home: Path):
        self.root = Path(home) / "envs"

    def folder(self, key: str) -> Path:
        return self.root / key

    def python(self, key: str) -> Path:
        return self.folder(key) / VENV / "bin" / "python"

    def ready(self, key: str) -> bool:
        return (self.folder(key) / READY).exists()

    @contextlib.contextmanager
    def locked(self, key: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.root / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def build(self, key: str, definition: dict[str, Any], log: IO[str], stopped: Callable[[], bool]) -> Path:
        """The environment's folder, built now unless it is already (BuildFailed: why not)."""
        with self.locked(key):
            folder = self.folder(key)
            if self.ready(key):
                log.write(f"kubelab: environment {key} was built by another run meanwhile\n")
                return folder
            shutil.rmtree(folder, ignore_errors=True)  # a build that was cut short
            (folder / "files").mkdir(parents=True)
            (folder / "definition.json").write_text(json.dumps(definition, indent=1))
            for name, text in definition["files"].items():
                target = folder / "files" / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            for argv in self.steps(folder, definition):
                log.write("kubelab: $ " + " ".join(redact(a) for a in argv) + "\n")
                log.flush()
                _run(argv, log, stopped)
            (folder / READY).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            return folder

    def steps(self, folder: Path, definition: dict[str, Any]) -> list[list[str]]:
        venv, files = folder / VENV, folder / "files"
        if definition.get("conda"):
            conda = conda_binary()
            if conda is None:
                raise BuildFailed("environment.conda: neither micromamba nor conda is installed here")
            file = str(files / definition["conda"])
            if Path(conda).name == "conda":
                return [[conda, "env", "create", "--yes", "--prefix", str(venv), "--file", file]]
            return [[conda, "create", "--yes", "--prefix", str(venv), "--file", file]]
        uv = uv_binary()
        python = definition["python"]
        here = ".".join(map(str, sys.version_info[:3]))
        interpreter = sys.executable if python == here else python
        steps = [[uv, "venv", "--quiet", "--no-project", "--python", interpreter, str(venv)]]
        install = [uv, "pip", "install", "--python", str(venv / "bin" / "python")]
        for link in definition.get("find_links") or []:
            install += ["--find-links", link]
        if definition.get("index_url"):
            install += ["--index-url", definition["index_url"]]
        for name in definition.get("requirements") or []:
            install += ["-r", str(files / name)]
        packages = definition.get("packages") or []
        if packages or definition.get("requirements"):
            steps.append([*install, *packages])
        return steps

    # -- kubelab env ls | rm ----------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """Each environment: key, size in bytes, built when, what defines it."""
        found = []
        for folder in sorted(self.root.glob("*")) if self.root.is_dir() else []:
            if not KEY.match(folder.name) or not folder.is_dir():
                continue
            try:
                definition = json.loads((folder / "definition.json").read_text())
            except (OSError, ValueError):
                definition = {}
            built = (folder / READY).read_text().strip() if self.ready(folder.name) else None
            found.append(
                {
                    "key": folder.name,
                    "size": _size(folder),
                    "built": built,
                    "python": definition.get("python"),
                    "packages": definition.get("packages", []),
                    "requirements": definition.get("requirements", []),
                    "conda": definition.get("conda"),
                }
            )
        return found

    def remove(self, key: str) -> int:
        """Delete one environment (under its lock: not while it builds); the bytes freed."""
        with self.locked(key):
            folder = self.folder(key)
            size = _size(folder)
            shutil.rmtree(folder)
        with contextlib.suppress(FileNotFoundError):
            (self.root / f"{key}.lock").unlink()
        return size


def _run(argv: list[str], log: IO[str], stopped: Callable[[], bool]) -> None:
    start = log.tell()
    process = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    while True:
        try:
            code = process.wait(timeout=0.05)
            break
        except subprocess.TimeoutExpired:
            if stopped():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise BuildFailed("stopped while building its environment") from None
    if code != 0:
        log.flush()
        with open(log.name, errors="replace") as reader:
            reader.seek(start)
            raise BuildFailed(failing_line(reader.read()))


def _size(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
