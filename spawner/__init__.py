"""JupyterHub side of kubelab: GPU notebooks for every user.

`KubeLabSpawner` (a KubeSpawner subclass) for clusters, `LocalKubeLabSpawner` for one machine;
both share the GPU catalog, project groups, the spawn form and admission.
Imports are lazy so `kubelab hub render` and the pure modules load without JupyterHub's weight.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KubeLabSpawner", "LocalKubeLabSpawner"]


def __getattr__(name: str) -> Any:
    if name == "KubeLabSpawner":
        from .kube import KubeLabSpawner

        return KubeLabSpawner
    if name == "LocalKubeLabSpawner":
        from .local import LocalKubeLabSpawner

        return LocalKubeLabSpawner
    raise AttributeError(name)
