"""An elastic run that changes size while it runs: it shrinks for a more urgent run, grows into
free GPUs.

Shrink: when a higher-priority run waits for GPUs this run holds above its `min` replicas, the
ledger's mark lists those GPUs (kubelab/backends/local/preemption.py); the runner retires the
replicas on them (SIGTERM to their torchrun agents, SIGKILL after the grace period) and frees
the GPUs at once, while the other replicas go on: their workers' collectives fail and torchrun
forms the smaller group. To torchrun that is a failure, which uses one of its `max_restarts`:
the agents get `SHRINKS_PER_START` more than the spec's (kubelab/elastic.py), and
once a start has shrunk that often the next mark stops the run whole instead (it resumes with new
agents and their full count), so a planned shrink never spends the user's restarts.

Grow: while nobody waits in the machine's queue and GPUs are free, the runner takes them and
starts more agents; the running agents see them waiting at the rendezvous and form the larger
group (a membership change, no restart counted).

Either way the scripts start again from their latest checkpoint, with the new `WORLD_SIZE`.
Once the old group's workers have all exited (none reports another step), the resize is
recorded; those still running a grace period (`preemption_grace`) after it began get SIGKILL, as
do retired replicas that outlive theirs, and the reason names them ("replica 1 ignored SIGTERM;
killed after 30 s"). The record: a resume marker at the checkpoint's step in `metrics.jsonl`,
so each step is shown once, and a `Running` transition with the new size and the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any, Protocol

import psutil

from kubelab.backends.local.elastic import ElasticLaunch
from kubelab.backends.local.gpus import GpuAllocator
from kubelab.backends.local.processes import Replica, stop_replicas
from kubelab.backends.local.resume import describe_run, resume_point
from kubelab.elastic import SHRINKS_PER_START
from kubelab.priorities import priority_name
from kubelab.records import RUNNING, RunDirectory, Status
from kubelab.spec import ExperimentSpec


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
        self.old: dict[str, list[psutil.Process]] = {}  # the previous group's workers, by agent
        self.news = ""  # why the size changed, recorded once the old group is gone
        self.deadline = 0.0  # when the old group's workers that are left get SIGKILL
        self.shrinks = 0  # planned shrinks of this start: each used one of the agents' restarts

    @property
    def key(self) -> str:
        return str(self.host.run.path)

    def check(self, replicas: list[Replica]) -> dict[str, Any] | None:
        """Serve a mark that takes spare replicas, or grow into free GPUs; return a mark that
        takes the whole run (the runner's ordinary preemption)."""
        spec = self.host.spec
        mark = self.allocator.preemption(self.key) if spec.preemptible else None
        if mark is not None and mark.get("gpus") and self.shrinks < SHRINKS_PER_START:
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
        self.shrinks += 1
        grace = self.host.spec.preemption_grace
        stubborn = retire(leaving, grace)
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
        news = f"shrunk to {size} for {taker} (priority {priority})"
        self.begin(old, news + ignored([r.label for r in stubborn], grace))

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

    def begin(self, old: dict[str, list[psutil.Process]], news: str) -> None:
        self.old, self.news = old, news
        self.deadline = time.monotonic() + self.host.spec.preemption_grace
        self.host.log_all(f"kubelab: {news}\n")
        self.settle()

    def settle(self) -> None:
        """Record the resize once the previous group's workers have all exited; those still
        running a grace period after the resize began are killed (a worker that ignores
        SIGTERM, or one that never learns of the change: no collective of it failed)."""
        left = {label: [p for p in processes if alive(p)] for label, processes in self.old.items()}
        left = {label: processes for label, processes in left.items() if processes}
        if not self.news or (left and time.monotonic() < self.deadline):
            return
        if left:
            for processes in left.values():
                kill(processes)
            grace = f"{self.host.spec.preemption_grace:g} s"
            killed = "; ".join(f"{label}'s old worker had not ended {grace} after; killed" for label in left)
            self.news += f"; {killed}"
            self.host.log_all(f"kubelab: {killed}\n")
        host = self.host
        host.status.restarts += 1  # the scripts start again (KUBELAB_RESTART_COUNT's meaning)
        step = resume_point(host.run, host.status.restarts)
        where = f"step {step}" if step >= 0 else "the start (no checkpoint)"
        host.move(RUNNING, f"{self.news}; going on from {where}", size=len(self.gpus_of))
        self.old, self.news = {}, ""


def workers(agents: list[Replica]) -> dict[str, list[psutil.Process]]:
    """The processes below each running agent now (by its label): its group's worker and what
    that forked."""
    found: dict[str, list[psutil.Process]] = {}
    for agent in agents:
        with contextlib.suppress(psutil.Error):
            found[agent.label] = psutil.Process(agent.process.pid).children(recursive=True)
    return found


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def retire(leaving: list[Replica], grace: float) -> list[Replica]:
    """SIGTERM the agents (torchrun passes it to its worker: a chance to save), SIGKILL what is
    left of them after `grace`, their workers (in sessions of their own) included; the
    replicas that were still running when the grace ended."""
    below = [process for processes in workers(leaving).values() for process in processes]

    def and_workers(signum: int) -> None:
        if signum == signal.SIGKILL:
            kill(below)

    return stop_replicas(leaving, grace, and_workers)


def kill(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
        with contextlib.suppress(ChildProcessError, OSError):  # an orphan this subreaper adopted
            os.waitpid(process.pid, os.WNOHANG)


def ignored(labels: list[str], grace: float) -> str:
    """The reason's words for processes that outlived their grace period."""
    return "".join(f"; {label} ignored SIGTERM; killed after {grace:g} s" for label in labels)
