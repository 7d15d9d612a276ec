"""The trial's environment contract: what every backend gives each replica, so a training script
reads the same variables wherever it runs (docs/architecture.md, "Adding a backend").

A backend lays these over the spec's own `env` (they win) and adds what only it knows: the local
runner its interpreter on PATH and the restart count, the Kubernetes builders the user and home.
"""

from __future__ import annotations

import json
import os

from kubelab.records import RunDirectory
from kubelab.shims import sweep_trial_env
from kubelab.spec import ExperimentSpec


def trial_env(
    run: RunDirectory,
    spec: ExperimentSpec,
    *,
    code: bool,
    shims: str,
    python_path: str | None,
    sweep: str | None,
    trial: int | None,
    platform: str,
) -> dict[str, str]:
    """kubelab's variables, the seed's, PYTHONPATH and a sweep trial's (NNI's among them).

    `run` is the run directory at the path the replica sees it; `code` puts its code snapshot first
    on PYTHONPATH, then `shims` (where `import nni` and `from polyaxon import tracking` find
    kubelab's), then `python_path` (what the replica would have had).
    """
    env = {
        "KUBELAB_RUN_ID": run.id,
        "KUBELAB_RUN_DIR": str(run.path),
        "KUBELAB_PARAMS": json.dumps(spec.resolved_params()),
        "KUBELAB_TENSORBOARD_DIR": str(run.tensorboard_dir),
        "KUBELAB_OUTPUTS_DIR": str(run.outputs_dir),
        "KUBELAB_CHECKPOINT_DIR": str(run.checkpoints_dir),  # survives the run's restarts
        "PYTHONUNBUFFERED": "1",
    }
    if spec.seed is not None:
        env.update(KUBELAB_SEED=str(spec.seed), PYTHONHASHSEED=str(spec.seed))
    paths = (str(run.code_dir) if code else "", shims, python_path or "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.update(sweep_trial_env(run.id, str(run.outputs_dir), sweep, trial, platform))
    return env
