"""An elastic run that changes size while it runs: it shrinks for a more urgent run, grows into
free GPUs.

Shrink: when a higher-priority run waits for GPUs this run holds above its `min` replicas, the
ledger's mark lists those GPUs (kubelab/backends/local/preemption.py); the runner retires the
replicas on them (SIGTERM to their torchrun agents, SIGKILL after the grace period) and frees
the GPUs at once, while the other replicas go on: their workers' collectives fail and torchrun
forms the smaller group (this uses one of its `max_restarts`). Grow: while nobody waits in the
machine's queue and GPUs are free, the runner takes them and starts more agents; the running
agents see them waiting at the rendezvous and form the larger group (a membership change, no
restart counted).

Either way the scripts start again from their latest checkpoint, with the new `WORLD_SIZE`.
Once the old group's workers have all exited (none reports another step), the resize is
recorded: a resume marker at the checkpoint's step in `metrics.jsonl`, so each step is shown
once, and a `Running` transition with the new size and the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any, Protocol

import psutil

from kubelab.backends.local.elastic import ElasticLaunch
from kubelab.backends.local.gpus import GpuAllocator
from kubelab.backends.local.processes import Replica, signal_group
from kubelab.backends.local.resume import describe_run, resume_point
from kubelab.priorities import priority_name
from kubelab.records import RUNNING, RunDirectory, Status
from kubelab.spec import ExperimentSpec

POLL = 0.05


class Host(Protocol):
    """What of the runner a resize uses."""

    run: RunDirectory
    spec: ExperimentSpec
    status: Status

    def move(
        self, state: str, reason: str, exit_code: int | None = None, size: int | None = None
    ) -> None: ...

    def log_all(self, text: str) -> None: ...

    def base_env(self) -> dict[str, str]: ...

    def spawn(
        self, role: str, index: int, env: dict[str, str], gpus: list[int], mode: str = "a"
    ) -> Replica: ...


class Resizer:
    """Shrinks and grows one start of an elastic run that holds whole GPUs."""

    def __init__(
        self,
        host: Host,
        launch: ElasticLaunch,
        allocator: GpuAllocator,
        gpus_of: dict[int, list[int]],
        gpu_ids: list[int],
    ):
        self.host, self.launch, self.allocator = host, launch, allocator
        self.gpus_of = gpus_of  # replica index -> its GPUs
        self.gpu_ids = gpu_ids  # the run's GPUs, the list the status and the sampler read
        self.old: list[psutil.Process] = []  # the previous group's workers, still ending
        self.news = ""  # why the size changed, recorded once the old group is gone

    @property
    def key(self) -> str:
        return str(self.host.run.path)

    def check(self, replicas: list[Replica]) -> dict[str, Any] | None:
        """Serve a mark that takes spare replicas, or grow into free GPUs; return a mark that
        takes the whole run (the runner's ordinary preemption)."""
        spec = self.host.spec
        mark = self.allocator.preemption(self.key) if spec.preemptible else None
        if mark is not None and mark.get("gpus"):
            self.shrink(replicas, mark)
            return None
        if mark is None and not self.news and len(replicas) < self.launch.elastic.max:
            self.grow(replicas, spec.resources.gpu_type)
        return mark

    def shrink(self, replicas: list[Replica], mark: dict[str, Any]) -> None:
        given = {str(gpu) for gpu in mark["gpus"]}
        leaving = [r for r in replicas if given & {str(g) for g in self.gpus_of.get(r.index, [])}]
        staying = [r for r in replicas if r not in leaving]
        old = workers(staying)
        retire(leaving, self.host.spec.preemption_grace)
        for replica in leaving:
            at = replicas.index(replica)
            del replicas[at], self.host.status.replicas[at]
            self.gpus_of.pop(replica.index, None)
            if replica.pidfd is not None:
                os.close(replica.pidfd)
        self.gpu_ids[:] = sorted(g for gpus in self.gpus_of.values() for g in gpus)
        self.allocator.give_up(self.key, sorted(given))
        taker = describe_run(str(mark.get("by", "")))
        priority = priority_name(int(mark.get("priority", 0)))
        size = f"{len(replicas)} of {self.launch.elastic.max} replicas"
        self.begin(old, f"shrunk to {size} for {taker} (priority {priority})")

    def grow(self, replicas: list[Replica], gpu_type: str | None) -> None:
        taken = {r.index for r in replicas}
        free = [i for i in range(self.launch.elastic.max) if i not in taken]
        per = len(next(iter(self.gpus_of.values()), [])) or 1
        got = self.allocator.grow(self.key, free, per, gpu_type)
        if not got:
            return
        old = workers(replicas)
        size = len(replicas) + len(got)
        for index, gpus in got.items():
            self.gpus_of[index] = gpus
            env = {**self.host.base_env(), **self.launch.replica_env(index, size)}
            replica = self.host.spawn("worker", index, env, gpus)
            replicas.append(replica)
            self.host.status.replicas.append(replica.record(RUNNING))
        self.gpu_ids[:] = sorted(g for gpus in self.gpus_of.values() for g in gpus)
        added = ",".join(str(g) for gpus in got.values() for g in gpus)
        self.begin(old, f"grew to {size} of {self.launch.elastic.max} replicas: GPU {added} came free")

    def begin(self, old: list[psutil.Process], news: str) -> None:
        self.old, self.news = old, news
        self.host.log_all(f"kubelab: {news}\n")
        self.settle()

    def settle(self) -> None:
        """Record the resize once the previous group's workers have all exited."""
        if not self.news or any(alive(process) for process in self.old):
            return
        host = self.host
        host.status.restarts += 1  # the scripts start again (KUBELAB_RESTART_COUNT's meaning)
        step = resume_point(host.run, host.status.restarts)
        where = f"step {step}" if step >= 0 else "the start (no checkpoint)"
        host.move(RUNNING, f"{self.news}; going on from {where}", size=len(self.gpus_of))
        self.old, self.news = [], ""


def workers(agents: list[Replica]) -> list[psutil.Process]:
    """The processes below the running agents now: the group's workers and what they forked."""
    found = []
    for agent in agents:
        with contextlib.suppress(psutil.Error):
            found += psutil.Process(agent.process.pid).children(recursive=True)
    return found


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def retire(leaving: list[Replica], grace: float) -> None:
    """SIGTERM the agents (torchrun passes it to its worker: a chance to save), SIGKILL what is
    left of them after `grace`, their workers (in sessions of their own) included."""
    below = workers(leaving)
    for replica in leaving:
        signal_group(replica.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(r.process.poll() is None for r in leaving):
        time.sleep(POLL)
    for replica in leaving:
        signal_group(replica.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            replica.process.wait(timeout=5)
    for process in below:
        with contextlib.suppress(psutil.Error):
            process.kill()
        with contextlib.suppress(ChildProcessError, OSError):  # an orphan this subreaper adopted
            os.waitpid(process.pid, os.WNOHANG)
