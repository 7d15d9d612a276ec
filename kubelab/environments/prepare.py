"""Where the environment and init steps meet a run: when it is submitted and before it starts.

`record` (the experiments service, at submit) copies `init.paths`, checks what can be checked
and writes the environment's definition and key into the run (`environment.json`), so a bad
requirements file is refused before anything exists. `prepare` (the runner, before GPUs are
asked for) does the init steps and builds the environment when its key is not built yet,
showing `Building` with the log in `logs/build.log`; an environment already built costs one
`stat`. `activate` puts it first on a replica's PATH.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from kubelab.environments.cache import BuildFailed, EnvironmentCache, conda_binary
from kubelab.environments.definition import define, read_record, write_record
from kubelab.environments.init_steps import copy_paths, run_steps
from kubelab.errors import FieldError, ValidationError
from kubelab.records import BUILDING, RunDirectory
from kubelab.spec import ExperimentSpec

BUILD_LOG = "build.log"  # in logs/: the sidebar's and `kubelab logs --replica build`'s "build" tab
TRIAL_PATH = "trial-path"  # in envs/: `kubelab` alone, for trials in an environment without it

__all__ = ["BUILD_LOG", "BuildFailed", "activate", "prepare", "record"]


def record(run: RunDirectory, spec: ExperimentSpec, base: Path, confine: bool) -> None:
    """Submit time (ValidationError: what is wrong, by field; the caller deletes the run)."""
    problems: list[FieldError] = []
    home = run.path.parent.parent
    if spec.init:
        run.code_dir.mkdir(exist_ok=True)
        problems += copy_paths(spec.init, base, run.code_dir, confine)
        for index, step in enumerate(spec.init):
            if step.artifacts and not (home / "runs" / step.artifacts.run).is_dir():
                problems.append(FieldError(f"init[{index}].artifacts.run", f"no run {step.artifacts.run}"))
        if not spec.workdir or not os.path.isabs(spec.workdir):  # relative: inside the code folder
            spec.workdir = str((run.code_dir / (spec.workdir or ".")).resolve())
            run.write_spec(spec.to_dict())
    if spec.environment and spec.environment.conda and conda_binary() is None:
        problems.append(FieldError("environment.conda", "needs micromamba, mamba or conda on this machine"))
    elif spec.environment and not spec.init:  # with init steps, its files may come from them
        definition, found = define(spec.environment, _folder(run, spec, base))
        problems += found
        if not found:
            write_record(run.path, definition)
    if problems:
        raise ValidationError("invalid experiment spec", problems)


def prepare(
    run: RunDirectory,
    spec: ExperimentSpec,
    move: Callable[[str, str], None],
    stopped: Callable[[], bool],
) -> Path | None:
    """Run time: the environment's folder (None: the run has none); BuildFailed: the reason."""
    if not spec.init and not spec.environment:
        return None
    home = run.path.parent.parent
    log_path = run.logs_dir / BUILD_LOG
    with open(log_path, "a") as log:
        if spec.init:
            move(BUILDING, f"{len(spec.init)} init step(s)")
            run_steps(spec.init, run.code_dir, home, log, stopped)
        if not spec.environment:
            return None
        saved = read_record(run.path)
        if saved is None:
            definition, problems = define(spec.environment, _folder(run, spec, home))
            if problems:
                raise BuildFailed(f"{problems[0].path}: {problems[0].reason}")
            key = write_record(run.path, definition)
        else:
            definition, key = saved["definition"], saved["key"]
        cache = EnvironmentCache(home)
        if cache.ready(key):
            if spec.init:
                log.write(f"kubelab: environment {key} is built; reusing it\n")
            return cache.folder(key)
        move(BUILDING, f"building environment {key}")
        try:
            return cache.build(key, definition, log, stopped)
        except BuildFailed as exc:
            raise BuildFailed(f"environment: {exc}") from None


def activate(env: dict[str, str], folder: Path) -> None:
    """A replica's environment runs the built virtualenv's `python`, which still finds `kubelab`
    (the trial side, standard library only) and the shims through PYTHONPATH."""
    bin_dir = folder / "venv" / "bin"
    env["PATH"] = os.pathsep.join([str(bin_dir), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(folder / "venv")
    env.pop("PYTHONHOME", None)
    trial = folder.parent / TRIAL_PATH
    link = trial / "kubelab"
    if not link.exists():
        trial.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another run made it meanwhile
            link.symlink_to(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ""), str(trial)]).strip(os.pathsep)


def _folder(run: RunDirectory, spec: ExperimentSpec, base: Path) -> Path:
    """Where the environment's files are read: the code snapshot, else the working directory."""
    if run.code_dir.is_dir() and any(run.code_dir.iterdir()):
        return run.code_dir
    return Path(spec.workdir) if spec.workdir else base
