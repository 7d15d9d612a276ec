"""kubelab: a deep-learning training platform inside Jupyter.

`import kubelab` stays cheap (standard library only) because training scripts do it:
`kubelab.params()`, `kubelab.report(step=..., loss=...)`, `kubelab.report_final(value)`, and
checkpoints that survive a preemption (`kubelab.save_checkpoint`, `kubelab.latest_checkpoint`).
"""

from kubelab.checkpoints import checkpoint_dir, latest_checkpoint, preempted, restart_count, save_checkpoint
from kubelab.trial import in_run, params, report, report_final, run_dir, tensorboard_dir

__all__ = [
    "checkpoint_dir",
    "in_run",
    "latest_checkpoint",
    "params",
    "preempted",
    "report",
    "report_final",
    "restart_count",
    "run_dir",
    "save_checkpoint",
    "tensorboard_dir",
]
__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:  # pragma: no cover - exercised through %load_ext
    """`%load_ext kubelab` registers the magics (imported only then)."""
    from kubelab.magics import load_ipython_extension as load

    load(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where `jupyter labextension develop` finds the built extension."""
    return [{"src": "labextension", "dest": "kubelab"}]
