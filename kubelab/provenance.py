"""What a run ran with, recorded in its `environment.json`, so a result can be reproduced.

Two moments write it. At submit, `record_code` notes the code folder's git commit and branch
and writes the changes not yet committed (untracked files included) as `uncommitted.patch`:
the snapshot in `code/` leaves `.git` out, so this is what ties it to history. When the run
starts, `record_runtime` asks the trial's own interpreter (not kubelab's, when the command
names another) for its Python version and every installed distribution through
`importlib.metadata`, and, where the run holds GPUs, NVML for the driver and CUDA versions
(through the sampler's reader interface, so tests feed recorded answers). On Kubernetes the
backend adds the image digest the kubelet pulled (`record_image`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from kubelab.records import RunDirectory

PATCH_LIMIT = 16 << 20  # bytes of uncommitted changes kept; larger ones are noted, not written
GIT_TIMEOUT = 30.0
PROBE_TIMEOUT = 60.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree
PYTHON_NAME = re.compile(r"^(python|pypy)[0-9.]*$")

# Runs in the trial's interpreter: only the standard library, one JSON line out.
PROBE = """\
import importlib.metadata as m, json, platform, sys
packages = {}
for d in m.distributions():
    name = d.metadata["Name"]
    if name:
        packages.setdefault(name, d.version)
packages = dict(sorted(packages.items(), key=lambda item: item[0].lower()))
print(json.dumps({"version": platform.python_version(), "implementation": platform.python_implementation(),
                  "executable": sys.executable, "packages": packages, "paths": sys.path[1:]}))
"""


# -- code: git --------------------------------------------------------------------------------
def _git(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    # fsmonitor and hooks would run programs a repository's config names; a status needs neither.
    command = ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-C", str(folder)]
    return subprocess.run(
        [*command, *args], capture_output=True, timeout=GIT_TIMEOUT, env=env, stdin=subprocess.DEVNULL
    )


def _in_work_tree(folder: Path) -> bool:
    """A `.git` in the folder or above it: the cheap test before starting any git process."""
    return any((parent / ".git").exists() for parent in (folder, *folder.parents))


def git_state(folder: Path, patch_file: Path) -> dict[str, Any] | None:
    """The commit `folder` is at and its uncommitted changes (written to `patch_file`), or None
    when it is in no git work tree (or git is not installed)."""
    folder = folder.resolve()
    if shutil.which("git") is None or not _in_work_tree(folder):
        return None
    try:
        top = _git(folder, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return None
        head = _git(folder, "rev-parse", "--verify", "-q", "HEAD")
        commit = head.stdout.decode().strip() if head.returncode == 0 else None
        branch = _git(folder, "symbolic-ref", "-q", "--short", "HEAD").stdout.decode().strip() or None
        patch = _uncommitted(folder, commit or EMPTY_TREE)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"git did not answer: {exc}"}
    root = Path(top.stdout.decode().strip())
    state: dict[str, Any] = {
        "commit": commit,
        "branch": branch,
        "path": folder.relative_to(root).as_posix() if folder != root else ".",
        "dirty": bool(patch),
        "patch": None,
    }
    if len(patch) > PATCH_LIMIT:
        state["patch_error"] = f"{len(patch)} bytes of changes, over {PATCH_LIMIT}: not kept"
    elif patch:
        patch_file.write_bytes(patch)
        state["patch"] = patch_file.name
    return state


def _uncommitted(folder: Path, base: str) -> bytes:
    """`git diff` of the folder against `base`, untracked (not ignored) files included, made in a
    throwaway index so the user's own staging area is untouched."""
    with tempfile.TemporaryDirectory(prefix="kubelab-git-") as scratch:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(folder, "read-tree", base if base != EMPTY_TREE else "--empty", env=env).check_returncode()
        _git(folder, "add", "-A", "--", ".", env=env).check_returncode()
        # No external diff program nor textconv filter: a repository's config cannot run one here.
        flags = ("--cached", "--binary", "--no-color", "--no-ext-diff", "--no-textconv")
        diff = _git(folder, "diff", *flags, base, "--", ".", env=env)
        diff.check_returncode()
        return diff.stdout


def record_code(run: RunDirectory, folder: Path) -> None:
    """At submit: the code folder's git state into `environment.json` (nothing when not in git)."""
    state = git_state(folder, run.patch_file)
    if state is not None:
        run.write_environment({**run.environment(), "git": state})


# -- runtime: the trial's interpreter, GPUs ----------------------------------------------------
def trial_interpreter(argv: list[str], env: dict[str, str]) -> str:
    """The Python a command runs under: its first word when that is a Python, the interpreter a
    script's `#!` line names (`torchrun`, `papermill`), else the one kubelab runs (`python`
    in a run's PATH means that one)."""
    if argv:
        found = shutil.which(argv[0], path=env.get("PATH"))
        if found and PYTHON_NAME.match(Path(found).name):
            return found
        if found:
            try:
                with open(found, "rb") as handle:
                    first = handle.readline(256).decode(errors="replace")
            except OSError:
                first = ""
            words = first[2:].split() if first.startswith("#!") else []
            if words and Path(words[0]).name == "env" and len(words) > 1:
                words = [shutil.which(words[1], path=env.get("PATH")) or words[1]]
            if words and PYTHON_NAME.match(Path(words[0]).name) and Path(words[0]).exists():
                return words[0]
    return sys.executable


def python_environment(python: str, env: dict[str, str], cache: Path | None = None) -> dict[str, Any]:
    """The interpreter's version and installed distributions, asked of that interpreter (with
    `-I`: what is installed in it, not a run's PYTHONPATH). Asking takes a Python start and a
    walk of site-packages (~0.3-0.6 s), so the answer is kept in `cache` (a folder) until the
    interpreter or a folder on its path changes (an install or uninstall changes its folder)."""
    cached = _cached(cache, python)
    if cached is not None:
        return cached
    try:
        done = subprocess.run(
            [python, "-I", "-c", PROBE],
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        data = json.loads(done.stdout.decode().strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"executable": python, "error": f"could not ask {python} for its packages: {exc}"}
    if not isinstance(data, dict):
        return {"executable": python, "error": "no answer"}
    paths = [p for p in data.pop("paths", []) if isinstance(p, str)]
    if cache is not None:
        stamps = _stamps([python, *paths])
        with contextlib.suppress(OSError):
            cache.mkdir(parents=True, exist_ok=True)
            tmp = cache / f".{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.write_text(json.dumps({"stamps": stamps, "python": data}))
            os.replace(tmp, _cache_file(cache, python))
    return data


def _cache_file(cache: Path, python: str) -> Path:
    # The path, not its target: each venv's python links to the same base interpreter.
    return cache / (hashlib.sha256(os.path.abspath(python).encode()).hexdigest()[:24] + ".json")


def _stamps(paths: list[str]) -> dict[str, int | None]:
    stamps: dict[str, int | None] = {}
    for path in paths:
        try:
            stamps[path] = os.stat(path).st_mtime_ns
        except OSError:
            stamps[path] = None
    return stamps


def _cached(cache: Path | None, python: str) -> dict[str, Any] | None:
    if cache is None:
        return None
    try:
        entry = json.loads(_cache_file(cache, python).read_text())
        stamps, data = entry["stamps"], entry["python"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(stamps, dict) or not isinstance(data, dict) or _stamps(list(stamps)) != stamps:
        return None
    return data


def gpu_environment(reader: Any, missing: str) -> dict[str, Any]:
    """Driver, CUDA and GPU names from a GPU reader (`NvmlReader.system()`), or why none."""
    if reader is None:
        return {"error": missing}
    try:
        return dict(reader.system())
    except Exception as exc:  # a driver that stops answering: noted, the run goes on
        return {"error": f"the GPU reader did not answer: {exc}"}


def record_runtime(run: RunDirectory, argv: list[str], env: dict[str, str], gpu_ids: list[int]) -> None:
    """When the run starts: its interpreter's packages and, with GPUs, driver and CUDA."""
    environment = run.environment()
    if "python" in environment:  # a resumed run keeps what its first start found
        return
    cache = run.path.parent.parent / "environments"  # beside runs/ in the kubelab home
    environment["python"] = python_environment(trial_interpreter(argv, env), env, cache)
    if gpu_ids:
        from kubelab.backends.local.system_sampler import open_gpu_reader

        reader, missing = open_gpu_reader()
        try:
            environment["gpu"] = gpu_environment(reader, missing)
        finally:
            if reader is not None:
                reader.close()
    run.write_environment({**run.environment(), **environment})


class RuntimeRecorder:
    """`record_runtime` beside the run, in a thread: the trial starts without waiting for it."""

    def __init__(self, run: RunDirectory, argv: list[str], env: dict[str, str], gpu_ids: list[int]):
        self.thread = threading.Thread(
            target=self._record, args=(run, argv, env, list(gpu_ids)), name="kubelab-environment", daemon=True
        )

    @staticmethod
    def _record(run: RunDirectory, argv: list[str], env: dict[str, str], gpu_ids: list[int]) -> None:
        with contextlib.suppress(OSError):  # the run folder went away
            record_runtime(run, argv, env, gpu_ids)

    def start(self) -> RuntimeRecorder:
        self.thread.start()
        return self

    def join(self, timeout: float = PROBE_TIMEOUT) -> None:
        if self.thread.is_alive():
            self.thread.join(timeout)


def record_image(run: RunDirectory, pod_status: dict[str, Any]) -> None:
    """On Kubernetes: the image and the digest the kubelet resolved it to, from the pod status."""
    if "image" in run.environment():
        return
    for container in pod_status.get("containerStatuses") or []:
        digest = container.get("imageID") or ""
        if digest:
            image = {"image": container.get("image"), "digest": digest.rpartition("@")[2] or digest}
            run.write_environment({**run.environment(), "image": image})
            return
