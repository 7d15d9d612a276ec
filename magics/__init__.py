"""IPython side of kubelab: `%load_ext kubelab` registers the magics.

`%%train`, `%train -f`, `%sweep`, `%pipeline`, `%experiments`, `%logs`, `%stop`, `%tensorboard`, `%gpus`,
`%serve` (see `docs/notebook.md`). Importing this package costs little; ipywidgets and the REST
client load when a magic first needs them.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    from kubelab.magics.commands import KubelabMagics

    ipython.register_magics(KubelabMagics)
    _compat_modules()


def _compat_modules() -> None:
    """`from nni.experiment import Experiment` (and Polyaxon's client) work in the notebook too,
    unless the real packages are installed there: kubelab's shims go last on sys.path."""
    import importlib.util
    import sys

    from kubelab.shims import SHIMS

    if str(SHIMS) not in sys.path and importlib.util.find_spec("nni") is None:
        sys.path.append(str(SHIMS))
