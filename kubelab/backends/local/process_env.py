"""The environment a local run's processes start with: the trial's contract over the runner's own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kubelab.backends.trial_env import trial_env
from kubelab.environments.prepare import activate
from kubelab.records import RunDirectory, Status
from kubelab.shims import SHIMS
from kubelab.spec import ExperimentSpec


def process_env(
    run: RunDirectory, spec: ExperimentSpec, status: Status, environment: Path | None
) -> dict[str, str]:
    """Every replica's variables (before its rank's): the runner's own, the spec's, the trial's
    contract, the restart count, kubelab's interpreter first on PATH and the run's environment."""
    env = {**os.environ, **spec.env}
    contract = trial_env(
        run,
        spec,
        code=run.code_dir.exists(),
        shims=str(SHIMS),
        python_path=env.get("PYTHONPATH"),
        sweep=status.sweep,
        trial=status.trial,
        platform="local",
    )
    env.update(contract, KUBELAB_RESTART_COUNT=str(status.restarts))
    # "python" in a command means the interpreter kubelab runs under, with its packages.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if environment:
        activate(env, environment)
    return env
