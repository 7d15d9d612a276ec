"""The distributed-training environment (docs/kubernetes.md), shared by every backend.

Ranks are the stable replica indices a backend assigns (a process number locally, the
Job completion index on Kubernetes), never something derived from sorting addresses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    """Where each replica listens. `workers[i]` is `host:port` of replica i."""

    framework: str
    workers: list[str]
    master_addr: str
    master_port: int
    parameter_servers: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return len(self.workers)


def replica_env(topology: Topology, rank: int, local_rank: int = 0) -> dict[str, str]:
    """Environment for replica `rank` (a worker) under `topology`."""
    framework = topology.framework
    size = topology.world_size
    env = {"KUBELAB_REPLICA": str(rank), "KUBELAB_REPLICAS": str(size)}
    if framework == "pytorch":
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(size),
            LOCAL_RANK=str(local_rank),
            MASTER_ADDR=topology.master_addr,
            MASTER_PORT=str(topology.master_port),
        )
    elif framework == "tensorflow":
        env["TF_CONFIG"] = tf_config(topology, "worker", rank)
    elif framework == "paddle":
        env.update(
            PADDLE_TRAINER_ID=str(rank),
            PADDLE_TRAINERS_NUM=str(size),
            PADDLE_TRAINER_ENDPOINTS=",".join(topology.workers),
            PADDLE_CURRENT_ENDPOINT=topology.workers[rank],
        )
    return env


def tf_config(topology: Topology, task_type: str, index: int) -> str:
    """TF_CONFIG as a TFJob writes it: the cluster, and this task's type and index."""
    cluster: dict[str, list[str]] = {"worker": list(topology.workers)}
    if topology.parameter_servers:
        cluster["ps"] = list(topology.parameter_servers)
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


def free_ports(count: int) -> list[int]:
    """Ports free on this machine now, one per replica of a local distributed run."""
    import socket  # only distributed runs need ports

    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()
