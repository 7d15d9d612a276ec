"""An elastic PyTorch run on this machine: every replica a torchrun agent, one rendezvous for all.

The agents meet at a c10d store hosted by a process of its own rather than by one of them, so
losing any replica, the first included, leaves the store to the others. When a replica is lost
while at least `min` still run, the runner does not stop the run as it stops a fixed-size one:
it appends a resume marker at the latest checkpoint's step to `metrics.jsonl` (the survivors'
scripts start again from that checkpoint and report those steps anew, as after a preemption),
and torchrun forms the smaller group. A run with GPUs starts with as many replicas as the free
GPUs allow, between `min` and `max`, and makes room by preemption only for `min`; while it
runs it shrinks for a more urgent run and grows into free GPUs (kubelab/backends/local/resizing.py).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from kubelab.backends.distributed import free_ports
from kubelab.elastic import SHRINKS_PER_START, Elastic
from kubelab.spec import ExperimentSpec

LAST_CALL = 2  # seconds a rendezvous waits for more agents once `min` have joined (torchrun: 30)
# The rendezvous store: run by the run's own python, which has torch since torchrun needs it.
STORE_HOST = """
import sys, time, torch.distributed as dist
port = int(sys.argv[1])
store = dist.TCPStore("127.0.0.1", port, is_master=True, multi_tenant=True, wait_for_workers=False)
while True:
    time.sleep(3600)
"""


@dataclass(frozen=True)
class ElasticLaunch:
    """How one start of an elastic run launches its replicas."""

    elastic: Elastic
    run_id: str
    port: int

    @classmethod
    def of(cls, spec: ExperimentSpec, run_id: str) -> ElasticLaunch | None:
        return cls(spec.elastic, run_id, free_ports(1)[0]) if spec.elastic else None

    def agent_argv(self, argv: list[str]) -> list[str]:
        """The replica's command: a torchrun agent running `argv` as its one worker."""
        elastic = self.elastic
        return [
            "python",
            "-m",
            "torch.distributed.run",
            f"--nnodes={elastic.min}:{elastic.max}",
            "--nproc-per-node=1",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{self.port}",
            f"--rdzv-id={self.run_id}",
            f"--rdzv-conf=is_host=false,last_call_timeout={LAST_CALL}",
            f"--max-restarts={elastic.max_restarts + SHRINKS_PER_START}",
            "--no-python",
            *argv,
        ]

    def start_store(self, env: dict[str, str], log: str) -> subprocess.Popen[bytes]:
        """The rendezvous store's process; it ends with the run's other descendants."""
        with open(log, "a") as out:
            return subprocess.Popen(
                ["python", "-c", STORE_HOST, str(self.port)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def goes_on(self, running: int) -> bool:
        """May the run go on with `running` replicas after losing one?"""
        return running >= self.elastic.min

    def replica_env(self, index: int, size: int) -> dict[str, str]:
        """kubelab's names for the replica; torchrun sets RANK, WORLD_SIZE and the rest per group.

        torchrun's shared bootstrap store is off: with it, an agent that was rank 0 before a
        new agent joined does not publish its address in the new round, and the newcomer
        waits for it forever (a run never grew); without it every round publishes its own."""
        return {
            "KUBELAB_REPLICA": str(index),
            "KUBELAB_REPLICAS": str(size),
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        }

    @staticmethod
    def ledger_entry(spec: ExperimentSpec) -> tuple[int, int] | None:
        """(GPUs per replica, `min` replicas) for the ledger, which then records each GPU's
        replica so that a preemption may take only the replicas above `min`; whole GPUs only."""
        per = spec.resources.gpus
        if spec.elastic is None or not per or per != int(per):
            return None
        return int(per), spec.elastic.min

    @staticmethod
    def fewer_gpus(spec: ExperimentSpec) -> tuple[float, ...]:
        """The smaller GPU counts an elastic run may start with, largest first, down to `min`
        replicas: it starts at the size the free GPUs allow rather than waiting for `max`."""
        per = spec.resources.gpus
        if spec.elastic is None or not per or per != int(per):
            return ()
        return tuple(per * n for n in range(spec.elastic.max - 1, spec.elastic.min - 1, -1))
