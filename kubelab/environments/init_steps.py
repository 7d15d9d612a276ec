"""A spec's `init` steps, done in the run's code folder before its command (Polyaxon v1's `init`).

`paths` are copied when the run is submitted (they are the user's files of that moment, like the
code snapshot); `git`, `artifacts` and `file` are done by the runner before the command, logged
in the run's build log. A private repository's credentials come from the user's own workspace:
git's credential helpers and `GIT_ASKPASS` as configured for the user, and
`$KUBELAB_HOME/git-credentials` (git's `store` format) when it exists; never from the spec, and
never printed: every address in a message loses its user and password (`cache.redact`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO

from kubelab.environments.cache import BuildFailed, failing_line, redact
from kubelab.environments.spec import ArtifactsSource, FileSource, GitSource, InitStep
from kubelab.errors import FieldError
from kubelab.records import RunDirectory

CREDENTIALS = "git-credentials"  # in $KUBELAB_HOME, git's `store` format, mode 0600


def copy_paths(steps: list[InitStep], base: Path, code: Path, confine: bool) -> list[FieldError]:
    """Submit time: each `paths` entry (relative to the submitter's folder) into `code/<path>`."""
    problems: list[FieldError] = []
    root = base.resolve()
    for index, step in enumerate(steps):
        for name in step.paths or []:
            source = (root / name).resolve()
            where = f"init[{index}].paths"
            if confine and source != root and root not in source.parents:
                problems.append(FieldError(where, f"'{name}' is outside the workspace"))
            elif not source.exists():
                problems.append(FieldError(where, f"'{name}' does not exist"))
            else:
                target = code / (step.path or ".") / Path(name).name
                if code.resolve() not in target.resolve().parents:
                    problems.append(FieldError(where, f"'{name}' would leave the run's code folder"))
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_dir():
                    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
                else:
                    shutil.copy2(source, target)
    return problems


def run_steps(
    steps: list[InitStep], code: Path, home: Path, log: IO[str], stopped: Callable[[], bool]
) -> None:
    """Run time: git, artifacts and file steps in order (BuildFailed: the field and why)."""
    for index, step in enumerate(steps):
        if stopped():
            raise BuildFailed("stopped during its init steps")
        where = f"init[{index}]"
        folder = inside(code, code / (step.path or "."), f"{where}.path")
        if step.git is not None:
            _git(step.git, code, step.path, home, log, f"{where}.git")
        elif step.artifacts is not None:
            _artifacts(step.artifacts, folder, home, f"{where}.artifacts")
        elif step.file is not None:
            inside(code, folder / step.file.filename, f"{where}.file.filename")
            _file(step.file, folder)


def inside(code: Path, target: Path, where: str) -> Path:
    """`target`, refused if a link (a cloned repository's, say) takes it out of the code folder."""
    root = code.resolve()
    resolved = target.resolve()
    if resolved != root and root not in resolved.parents:
        raise BuildFailed(f"{where}: {target.relative_to(code)} leads out of the run's code folder (a link)")
    return target


def repository_name(url: str) -> str:
    name = url.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name.removesuffix(".git") or "repository"


def git_command(home: Path) -> list[str]:
    """`git` with the user's workspace credentials (a path, never a secret) and no prompts."""
    argv = ["git", "-c", "protocol.ext.allow=never"]
    store = home / CREDENTIALS
    if store.is_file():
        argv += ["-c", "credential.helper=", "-c", f"credential.helper=store --file={store}"]
    return argv


def _git(source: GitSource, code: Path, path: str | None, home: Path, log: IO[str], where: str) -> None:
    target = code / (path or repository_name(source.url))
    if target.exists() and any(target.iterdir()):
        raise BuildFailed(f"{where}: {target.relative_to(code)} already exists in the run's code folder")
    git = git_command(home)
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    log.write(f"kubelab: cloning {redact(source.url)}{' at ' + source.revision if source.revision else ''}\n")
    log.flush()
    for argv in (
        [*git, "clone", "--quiet", "--", source.url, str(target)],
        [*git, "-C", str(target), "checkout", "--quiet", source.revision, "--"] if source.revision else [],
    ):
        if not argv:
            continue
        done = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        output = redact(done.stdout + done.stderr)
        log.write(output)
        if done.returncode != 0:
            raise BuildFailed(f"{where}: {failing_line(output)}")


def _artifacts(source: ArtifactsSource, target: Path, home: Path, where: str) -> None:
    outputs = RunDirectory(home / "runs" / source.run).outputs_dir
    if not outputs.is_dir():
        raise BuildFailed(f"{where}.run: no run {source.run} with outputs in your kubelab home")
    chosen = [(f"{where}.files", name) for name in source.files] + [(f"{where}.dirs", d) for d in source.dirs]
    if not chosen:
        shutil.copytree(outputs, target, symlinks=True, dirs_exist_ok=True)
        return
    for field, name in chosen:
        item = outputs / name
        if not item.exists() or item.is_symlink():
            raise BuildFailed(f"{field}: '{name}' is not in the outputs of run {source.run}")
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        if item.is_dir():
            shutil.copytree(item, destination, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(item, destination)


def _file(source: FileSource, folder: Path) -> None:
    target = folder / source.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source.content)
    if source.chmod:
        target.chmod(int(source.chmod, 8))
