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
