"""The distributed environment (docs/kubernetes.md) for pods of an Indexed Job.

Every pod of a Job shares one template, so per-pod values come from the completion index:
`RANK` is read through the downward API from the `batch.kubernetes.io/job-completion-index`
annotation, and the other variables refer to it as `$(RANK)`, which the kubelet expands.
The values equal `kubelab.backends.distributed.replica_env` for every rank (a test checks this), so
a script sees the same environment locally and on the cluster.
"""

from __future__ import annotations

import json
from typing import Any

from kubelab.backends.distributed import Topology
from kubelab.backends.kubernetes.names import INDEX_ANNOTATION
from kubelab.spec import ExperimentSpec

PORTS = {"pytorch": 23456, "tensorflow": 2222, "paddle": 36543}
RANK_REF = "$(RANK)"
_PLACEHOLDER = "__kubelab_rank__"


def ports_for(framework: str) -> int:
    return PORTS.get(framework, PORTS["pytorch"])


def topology(spec: ExperimentSpec, job: str, service: str, ps_job: str) -> Topology:
    """Stable DNS names: replica i of Job `job` is `<job>-<i>.<service>`."""
    port = ports_for(spec.framework)
    workers = [f"{job}-{i}.{service}:{port}" for i in range(spec.replicas)]
    ps = tuple(f"{ps_job}-{i}.{service}:{port}" for i in range(spec.parameter_servers))
    return Topology(spec.framework, workers, f"{job}-0.{service}", port, ps)


def _index_from(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "valueFrom": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}
        },
    }


def _tf_config(topo: Topology, task_type: str, index_var: str) -> str:
    cluster: dict[str, list[str]] = {"worker": list(topo.workers)}
    if topo.parameter_servers:
        cluster["ps"] = list(topo.parameter_servers)
    text = json.dumps({"cluster": cluster, "task": {"type": task_type, "index": _PLACEHOLDER}})
    return text.replace(f'"{_PLACEHOLDER}"', f"$({index_var})")


def distributed_env(
    spec: ExperimentSpec, job: str, service: str, ps_job: str, role: str = "worker"
) -> list[dict[str, Any]]:
    """Env entries for one role's pod template; order matters, `RANK` comes first."""
    topo = topology(spec, job, service, ps_job)
    if role == "ps":
        return [
            _index_from("KUBELAB_PS_INDEX"),
            {"name": "TF_CONFIG", "value": _tf_config(topo, "ps", "KUBELAB_PS_INDEX")},
        ]
    size = str(topo.world_size)
    values: dict[str, str] = {"KUBELAB_REPLICA": RANK_REF, "KUBELAB_REPLICAS": size}
    if spec.framework == "pytorch":
        master, port = topo.master_addr, str(topo.master_port)
        values.update(
            WORLD_SIZE=size,
            LOCAL_RANK="0",
            MASTER_ADDR=master,
            MASTER_PORT=port,
            PET_NNODES=size,
            PET_NODE_RANK=RANK_REF,
            PET_MASTER_ADDR=master,
            PET_MASTER_PORT=port,
            PET_NPROC_PER_NODE=str(max(1, spec.resources.gpus)),
        )
    elif spec.framework == "tensorflow":
        values["TF_CONFIG"] = _tf_config(topo, "worker", "RANK")
    elif spec.framework == "paddle":
        values.update(
            PADDLE_TRAINER_ID=RANK_REF,
            PADDLE_TRAINERS_NUM=size,
            PADDLE_TRAINER_ENDPOINTS=",".join(topo.workers),
            PADDLE_CURRENT_ENDPOINT=f"{job}-{RANK_REF}.{service}:{topo.master_port}",
        )
    return [_index_from("RANK"), *({"name": k, "value": v} for k, v in values.items())]
