"""IPython side of kubelab: `%load_ext kubelab` registers the magics.

`%%train`, `%train -f`, `%sweep`, `%pipeline`, `%experiments`, `%logs`, `%stop`, `%tensorboard`, `%gpus`
(see `docs/notebook.md`). Importing this package costs little; ipywidgets and the REST
client load when a magic first needs them.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    from kubelab.magics.commands import KubelabMagics

    ipython.register_magics(KubelabMagics)
