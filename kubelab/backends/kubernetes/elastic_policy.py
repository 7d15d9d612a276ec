"""An elastic run on Kubernetes: a PyTorchJob with an `elasticPolicy` (Training Operator v1), pure.

The operator gives every Worker pod torchrun's settings as `PET_*` variables (`PET_NNODES=MIN:MAX`,
the c10d rendezvous at the first Worker's Service, `PET_MAX_RESTARTS`), so the container runs the
training command under `python -m torch.distributed.run` and torchrun reads the rest from them.
There is no Master: with c10d every Worker is alike, and the group forms again without a lost one.
"""

from __future__ import annotations

from typing import Any

from kubelab.elastic import Elastic
from kubelab.errors import FieldError
from kubelab.spec import ExperimentSpec

RDZV_BACKEND = "c10d"


def elastic_policy(elastic: Elastic) -> dict[str, Any]:
    return {
        "rdzvBackend": RDZV_BACKEND,
        "minReplicas": elastic.min,
        "maxReplicas": elastic.max,
        "maxRestarts": elastic.max_restarts,
        "nProcPerNode": 1,
    }


def agent_command(argv: list[str]) -> list[str]:
    """The container's command: a torchrun agent running the training command as its one worker."""
    return ["python", "-m", "torch.distributed.run", "--no-python", *argv]


def elastic_problems(spec: ExperimentSpec) -> list[FieldError]:
    """An elastic run needs the Training Operator's PyTorchJob (`engine: kubeflow`)."""
    if spec.elastic is None or spec.engine == "kubeflow":
        return []
    why = "an elastic run (replicas min:max) is a PyTorchJob with an elasticPolicy: engine: kubeflow"
    return [FieldError("engine", why)]
