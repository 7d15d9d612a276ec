"""Which engine runs a pipeline: kubelab's driver everywhere; `argo` only by name.

`engine: argo` is answered from API discovery, so the reason is true of the cluster at hand:
on one machine there is no Argo; on a cluster that does not serve `argoproj.io/v1alpha1`
Workflows, Argo Workflows is not installed; where it is served, kubelab still refuses it,
because each step's record, templates (`steps.X.metrics.M` is read after X ends) and the
restartable ledger belong to the driver, and a Workflow whose tasks each run one step needs
a ledger safe for concurrent writers, which kubelab does not have yet.
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
        reason = (
            f"argo: the cluster serves {WORKFLOWS}, but submitting a pipeline as a Workflow is "
            "not supported yet; use engine: driver, which runs the steps as Jobs"
        )
    raise ValidationError("invalid pipeline spec", [FieldError("engine", reason)])


def _serves_argo(backend: Backend) -> bool:
    from kubelab.backends.kubernetes.backend import KubernetesBackend

    assert isinstance(backend, KubernetesBackend)
    return backend.api.serves(*ARGO)
