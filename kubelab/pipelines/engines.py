"""Which engine runs a pipeline: kubelab's driver everywhere; `argo` where the cluster has it.

`engine: argo` is answered from API discovery, so the answer is true of the cluster at hand:
where `argoproj.io/v1alpha1` Workflows are served, the pipeline is submitted as a Workflow
(`kubelab.pipelines.argo`); on one machine there is no Argo, and a cluster that does not
serve Workflows has no Argo Workflows installed: both are refused with that reason.
"""

from __future__ import annotations

from kubelab.backends.base import Backend
from kubelab.errors import FieldError, ValidationError

ARGO = ("argoproj.io", "v1alpha1", "Workflow")
WORKFLOWS = "argoproj.io/v1alpha1 Workflows"


def require(engine: str, backend: Backend) -> None:
    """Refuse, by field and reason, an engine this backend cannot run."""
    if engine != "argo":
        return
    if backend.name != "kubernetes":
        reason = f"argo needs the Kubernetes backend and a cluster serving {WORKFLOWS}; use engine: driver"
    elif not _serves_argo(backend):
        reason = (
            f"argo: this cluster does not serve {WORKFLOWS} (API discovery); install Argo "
            "Workflows, or use engine: driver, which runs the steps as Jobs"
        )
    else:
        return
    raise ValidationError("invalid pipeline spec", [FieldError("engine", reason)])


def _serves_argo(backend: Backend) -> bool:
    from kubelab.backends.kubernetes.backend import KubernetesBackend

    assert isinstance(backend, KubernetesBackend)
    return backend.api.serves(*ARGO)
