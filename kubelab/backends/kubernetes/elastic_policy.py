"""An elastic run on Kubernetes, pure: a PyTorchJob with an `elasticPolicy` (`engine: kubeflow`,
Training Operator v1), or an elastic Indexed Job that kubelab resizes (`engine: job`).

The operator gives every Worker pod torchrun's settings as `PET_*` variables (`PET_NNODES=MIN:MAX`,
the c10d rendezvous at the first Worker's Service, `PET_MAX_RESTARTS`), so the container runs the
training command under `python -m torch.distributed.run` and torchrun reads the rest from them.
There is no Master: with c10d every Worker is alike, and the group forms again without a lost one.

Without the operator the run is an Indexed Job behind the run's headless Service, and kubelab
gives the same `PET_*` settings itself (`elastic_env`): the rendezvous is the c10d store that
the index-0 pod's agent hosts at its stable name `<job>-0.<service>`. Resizing removes the
highest indexes only and never goes below `min` (at least 1), so index 0 and its store stay.
kubelab changes `parallelism` and `completions` together (elastic_resizer.py).
"""

from __future__ import annotations

from typing import Any

from kubelab.backends.kubernetes.distributed_env import ports_for
from kubelab.backends.kubernetes.names import INDEX_ANNOTATION
from kubelab.elastic import SHRINKS_PER_START, Elastic
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


def elastic_env(
    elastic: Elastic, run_id: str, job: str, service: str, framework: str
) -> list[dict[str, Any]]:
    """The torchrun settings of an elastic Indexed Job's pods (as the operator's `PET_*`)."""
    index = {"fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}
    values = {
        "PET_NNODES": f"{elastic.min}:{elastic.max}",
        "PET_NPROC_PER_NODE": "1",
        "PET_RDZV_BACKEND": RDZV_BACKEND,
        "PET_RDZV_ENDPOINT": f"{job}-0.{service}:{ports_for(framework)}",
        "PET_RDZV_ID": run_id,
        "PET_MAX_RESTARTS": str(elastic.max_restarts + SHRINKS_PER_START),  # kubelab's shrinks
        # as on this machine (kubelab/backends/local/elastic.py): with the shared bootstrap
        # store, a newcomer waits for an address the old rank 0 does not publish again
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }
    pairs = ({"name": k, "value": v} for k, v in values.items())
    return [{"name": "KUBELAB_REPLICA", "valueFrom": index}, *pairs]


def elastic_problems(spec: ExperimentSpec) -> list[FieldError]:
    """Kueue admits a Job at one size, so an elastic Indexed Job cannot wait in a queue."""
    if spec.elastic is None or spec.engine == "kubeflow" or not spec.queue:
        return []
    why = "an elastic run (replicas min:max) is resized by kubelab, which a Kueue queue does not allow; "
    why += "leave out queue, or use engine: kubeflow (a PyTorchJob with an elasticPolicy)"
    return [FieldError("queue", why)]
