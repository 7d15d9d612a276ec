"""Which engine runs a pipeline: kubelab's driver everywhere; `argo` where the cluster has it.

`engine: argo` is answered from API discovery, so the answer is true of the cluster at hand:
where the backend's namespace (`Backend.cluster()`) serves `argoproj.io/v1alpha1` Workflows, the
pipeline is submitted as a Workflow (`kubelab.pipelines.argo`); a backend without a namespace
(one machine) has no Argo, and a cluster that does not serve Workflows has no Argo Workflows
installed: both are refused with that reason.
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
    cluster = backend.cluster()
    if cluster is None:
        reason = f"argo needs the Kubernetes backend and a cluster serving {WORKFLOWS}; use engine: driver"
    elif not cluster.api.serves(*ARGO):
        reason = (
            f"argo: this cluster does not serve {WORKFLOWS} (API discovery); install Argo "
            "Workflows, or use engine: driver, which runs the steps as Jobs"
        )
    else:
        return
    raise ValidationError("invalid pipeline spec", [FieldError("engine", reason)])
