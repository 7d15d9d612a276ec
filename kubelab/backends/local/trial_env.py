"""The environment a local run's processes start with: kubelab's variables over the runner's own."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kubelab.environments.prepare import activate
from kubelab.records import RunDirectory, Status
from kubelab.shims import SHIMS, sweep_trial_env
from kubelab.spec import ExperimentSpec


def trial_env(
    run: RunDirectory, spec: ExperimentSpec, status: Status, environment: Path | None
) -> dict[str, str]:
    """Every replica's variables (before its rank's): the run's folders, params, seed and restarts."""
    env = dict(os.environ)
    env.update(spec.env)
    params = spec.resolved_params()
    env.update(
        KUBELAB_RUN_ID=run.id,
        KUBELAB_RUN_DIR=str(run.path),
        KUBELAB_PARAMS=json.dumps(params),
        KUBELAB_TENSORBOARD_DIR=str(run.tensorboard_dir),
        KUBELAB_OUTPUTS_DIR=str(run.outputs_dir),
        KUBELAB_CHECKPOINT_DIR=str(run.checkpoints_dir),
        KUBELAB_RESTART_COUNT=str(status.restarts),
        PYTHONUNBUFFERED="1",
    )
    if spec.seed is not None:
        env.update(KUBELAB_SEED=str(spec.seed), PYTHONHASHSEED=str(spec.seed))
    env.update(sweep_trial_env(run.id, str(run.outputs_dir), status.sweep, status.trial, "local"))
    # "python" in a command means the interpreter kubelab runs under, with its packages.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    paths = [str(SHIMS)]  # `import nni` in a trial finds kubelab's NNI API first
    if run.code_dir.exists():
        paths.insert(0, str(run.code_dir))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if environment:
        activate(env, environment)
    return env
