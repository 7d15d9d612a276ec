"""kubelab: a deep-learning training platform inside Jupyter.

`import kubelab` stays cheap (standard library only) because training scripts do it:
`kubelab.params()`, `kubelab.report(step=..., loss=...)`, `kubelab.report_final(value)`.
"""

from kubelab.trial import in_run, params, report, report_final, run_dir, tensorboard_dir

__all__ = ["in_run", "params", "report", "report_final", "run_dir", "tensorboard_dir"]
__version__ = "0.1.0"


def load_ipython_extension(ipython: object) -> None:  # pragma: no cover - exercised through %load_ext
    """`%load_ext kubelab` registers the magics (imported only then)."""
    from kubelab.magics import load_ipython_extension as load

    load(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where `jupyter labextension develop` finds the built extension."""
    return [{"src": "labextension", "dest": "kubelab"}]
