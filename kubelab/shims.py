"""The trial-side compatibility modules (`nni`, `polyaxon`, `polyaxon_client`) and where trials find them.

The local runner puts the installed folder first on a trial's PYTHONPATH. A pod does not
see this installation, so the Kubernetes backend copies the folder into the run directory
(which pods mount at the same path) and its builders point PYTHONPATH there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

SHIMS = Path(__file__).parent / "nni_compat"
SHIMS_DIR = "compat"  # inside a run directory


def stage(run_dir: Path) -> Path:
    """Copy the shims into `run_dir/compat` (standard library only, a few tens of kilobytes)."""
    target = run_dir / SHIMS_DIR
    shutil.copytree(SHIMS, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)
    return target


def sweep_trial_env(
    run_id: str, outputs_dir: str, sweep: str | None, trial: int | None, platform: str
) -> dict[str, str]:
    """What a sweep's trial gets besides kubelab's own variables: its sweep and index, and NNI's
    trial environment (NNI_OUTPUT_DIR is the run's outputs/, which kubelab keeps and lists)."""
    if not sweep:
        return {}
    return {
        "KUBELAB_SWEEP_ID": sweep,
        "KUBELAB_TRIAL": "" if trial is None else str(trial),
        "NNI_PLATFORM": platform,
        "NNI_EXP_ID": sweep,
        "NNI_TRIAL_JOB_ID": run_id,
        "NNI_TRIAL_SEQ_ID": "" if trial is None else str(trial),
        "NNI_OUTPUT_DIR": outputs_dir,
    }
