"""The local runner: one small process per running experiment, in its own session.

`python -m kubelab.backends.local.runner RUN_DIR` waits for GPUs, starts the replicas, watches them,
and writes the final status. A warm runner (`kubelab.warm`) does the same through
`serve()` and then waits for its next run. Because it is detached from whoever submitted it, an
experiment outlives a restart of the Jupyter server or the CLI; anyone can re-attach
by reading `status.json`. Each replica runs in its own process group so that a stop
reaches the whole tree a training script may have forked (data loaders, torchrun). A process
can leave its group (`setsid`) or its parent (a daemon): the runner is a child subreaper, so
such orphans stay its descendants, and a stop or the run's end signals every descendant too,
before the run's GPUs go back to the ledger.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kubelab.backends.distributed import Topology, free_ports, replica_env, tf_config
from kubelab.backends.local.elastic import ElasticLaunch
from kubelab.backends.local.exit_reasons import describe_exit, format_seconds, last_exception
from kubelab.backends.local.gpus import GpuAllocator
from kubelab.backends.local.process_env import process_env
from kubelab.backends.local.processes import (
    Replica,
    become_subreaper,
    end_descendants,
    open_pidfd,
    stop_grace,
    stop_replicas,
)
from kubelab.backends.local.resizing import Resizer
from kubelab.backends.local.resume import describe_run, resume_point
from kubelab.backends.local.run_folder import RunFolder
from kubelab.backends.local.system_sampler import SystemSampler
from kubelab.environments.prepare import BuildFailed, prepare
from kubelab.gpu_share import is_fraction
from kubelab.log_times import LogClock
from kubelab.pids import process_start_time
from kubelab.priorities import priority_name
from kubelab.provenance import RuntimeRecorder
from kubelab.records import (
    FAILED,
    PREEMPTED,
    QUEUED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    TERMINAL,
    RunDirectory,
    parse_iso,
)
from kubelab.spec import ExperimentSpec
from kubelab.system_metrics import interval_for
from kubelab.tensorboard import tfevents
from kubelab.tensorboard.tfevents import MirrorThread, ScalarMirror

POLL = 0.05
PREEMPTION_CHECK = 0.5  # seconds between looks at the ledger for a preemption mark
FAST_POLL, FAST_FOR = 0.005, 1.0  # a short trial's end is seen within 5 ms, a long one's within 50


class Runner:
    def __init__(self, run: RunDirectory):
        self.run = run
        self.spec = ExperimentSpec.parse(run.spec())
        self.status = run.status()
        self.stopping = False  # a SIGTERM or SIGINT reached this process
        self.allocator: GpuAllocator | None = None
        self.preempted_by: dict[str, Any] | None = None  # the ledger's mark, once acted on
        self.environment: Path | None = None  # a built virtualenv's folder (kubelab.environments)
        self.recorder: RuntimeRecorder | None = None
        self.launch: ElasticLaunch | None = None  # an elastic run's agents and rendezvous
        self.lost: list[str] = []  # an elastic run's replicas that ended while the others went on
        self.folder = RunFolder(run.path)  # deleted under the run: taken as a stop
        self.resizer: Resizer | None = None  # an elastic run on whole GPUs shrinks and grows
        self.argv: list[str] = []

    # -- status ---------------------------------------------------------------------
    def move(self, state: str, reason: str, exit_code: int | None = None, size: int | None = None) -> None:
        if state in TERMINAL and self.recorder:  # a finished run's record is whole
            self.recorder.join()
        if state in TERMINAL and self.allocator:
            # GPUs come back before anyone can read that the run ended.
            self.allocator.release(str(self.run.path))
        self.status.move(state, reason, exit_code, size)
        self.folder.write(lambda: self.run.write_status(self.status))

    def stop_requested(self) -> bool:
        return self.stopping or self.run.stop_file.exists() or self.folder.gone()

    def on_term(self, _signum: int, _frame: object) -> None:
        self.stopping = True

    def reusable(self) -> bool:
        """May this process serve another run? Only after a clean end: the final status is on
        disk and nobody signalled the process itself (that means "go away", not "stop a run")."""
        try:
            return not self.stopping and not self.folder.gone() and self.run.status().terminal
        except OSError:  # its folder went away at the very end
            return False

    # -- main -----------------------------------------------------------------------
    def main(self) -> int:
        signal.signal(signal.SIGTERM, self.on_term)
        signal.signal(signal.SIGINT, self.on_term)
        become_subreaper()
        # Written with the first move (Queued, Running or the end), a few milliseconds from
        # now: one status write less before the run's processes start.
        self.status.runner_pid = os.getpid()
        self.status.runner_started = process_start_time(os.getpid())
        try:
            self.environment = prepare(self.run, self.spec, self.move, self.stop_requested)
            gpu_ids = self.acquire_gpus()
            if gpu_ids is None:
                state, reason = self.run.stop_outcome()
                self.move(state, reason + " while queued")
                return 0
            self.status.gpu_ids = gpu_ids
            # environment.json (packages, GPU driver): asked beside the run, joined before its end.
            self.recorder = RuntimeRecorder(self.run, self.spec.rendered_command(), self.base_env(), gpu_ids)
            self.recorder.start()
            # Reported metrics become TensorBoard scalars beside the user's own event files.
            with (
                MirrorThread(ScalarMirror(self.run.path, self.run.tensorboard_dir)),
                LogClock([self.run.logs_dir / name for name in self.log_names()]),  # lines' times
                SystemSampler.for_run(  # system.jsonl, every `system_metrics_interval` seconds
                    self.run.system_file, gpu_ids, interval_for(self.spec.system_metrics_interval)
                ),
            ):
                self.execute(gpu_ids)
        except BuildFailed as exc:  # the failing line of an init step or the environment's build
            self.move(*(self.run.stop_outcome() if self.stop_requested() else (FAILED, str(exc))))
        except Exception as exc:  # the runner must always leave a final status
            self.move(FAILED, f"kubelab runner error: {exc}")
        finally:
            end_descendants(signal.SIGKILL)  # the run is over: nothing of it keeps its GPUs
            if self.allocator:
                self.allocator.release(str(self.run.path))
        return 0

    def acquire_gpus(self, waiting: str = QUEUED, why: str = "") -> list[int] | None:
        per_replica = self.spec.resources.gpus
        if not per_replica:
            return []
        total = per_replica * self.spec.replicas
        self.allocator = GpuAllocator()
        if self.spec.resources.gpu_indices is not None:  # NNI's gpuIndices: only these GPUs
            only = set(self.spec.resources.gpu_indices)
            self.allocator.gpus = [gpu for gpu in self.allocator.gpus if gpu.index in only]
        waiting_reason = ""
        while not self.stop_requested():
            try:
                got = self.allocator.try_acquire(
                    str(self.run.path),
                    os.getpid(),
                    total,
                    self.spec.resources.gpu_type,
                    submitted=parse_iso(self.status.created_at),
                    priority=self.spec.priority,
                    preemptible=self.spec.preemptible,
                    fewer=ElasticLaunch.fewer_gpus(self.spec),
                    elastic=ElasticLaunch.ledger_entry(self.spec),
                )
            except ValueError as exc:
                self.move(FAILED, f"cannot be scheduled: {exc}")
                return []
            if got is not None:
                return got
            position = self.allocator.position(str(self.run.path)) or 0
            reason = f"waiting for {total:g} GPU(s): {position} experiment(s) ahead in this machine's queue"
            reason = f"{why}; {reason}" if why else reason
            if reason != waiting_reason:
                self.move(waiting, reason)
                waiting_reason = reason
            time.sleep(0.25)
        return None

    def execute(self, gpu_ids: list[int]) -> None:
        attempts = self.spec.retries + 1
        attempt = 1
        while attempt <= attempts:
            if self.status.terminal:
                return
            self.status.attempt = attempt
            replicas = self.start(gpu_ids, attempt)
            where = f"GPU {','.join(map(str, gpu_ids))}" if gpu_ids else "CPU"
            count = len(replicas)
            more = f", attempt {attempt} of {attempts}" if attempt > 1 else ""
            running = f"running {count} process{'es' if count > 1 else ''} on {where}{more}"
            self.move(RUNNING, running, size=count if self.launch else None)
            try:
                outcome = self.watch(replicas)
            finally:
                for replica in replicas:
                    if replica.pidfd is not None:
                        os.close(replica.pidfd)
            if self.preempted_by is not None:  # not a failure: the same attempt runs again
                if not self.requeue(gpu_ids):
                    return
                continue
            if outcome is None:
                count = len(replicas)  # an elastic run's last size
                done = "exited 0" if count == 1 else f"all {count} processes exited 0"
                if self.lost:
                    done = (
                        f"{count - len(self.lost)} of {count} processes exited 0; lost {', '.join(self.lost)}"
                    )
                self.move(SUCCEEDED, done, 0)
                return
            reason, code, retryable = outcome
            if self.stop_requested():
                self.move(*self.run.stop_outcome(), code)
                return
            if not retryable or attempt == attempts:
                self.move(FAILED, reason, code)
                return
            self.log_all(f"kubelab: {reason}; retrying (attempt {attempt + 1} of {attempts})\n")
            attempt += 1

    def requeue(self, gpu_ids: list[int]) -> bool:
        """After a preemption: free the GPUs, wait for new ones as Preempted, resume (False: stopped)."""
        mark, self.preempted_by = self.preempted_by or {}, None
        assert self.allocator is not None
        self.allocator.release(str(self.run.path))
        self.status.restarts += 1
        resume_from = resume_point(self.run, self.status.restarts)
        taker = describe_run(str(mark.get("by", "")))
        why = f"preempted for {taker} (priority {priority_name(int(mark.get('priority', 0)))})"
        where = f"step {resume_from}" if resume_from >= 0 else "the start (no checkpoint)"
        self.log_all(f"kubelab: {why}; it resumes from {where}\n")
        self.move(PREEMPTED, why)
        new = self.acquire_gpus(PREEMPTED, why)
        if new is None:
            state, reason = self.run.stop_outcome()
            self.move(state, reason + " while preempted")
            return False
        gpu_ids[:] = new  # the system sampler reads the same list
        return True

    # -- processes ------------------------------------------------------------------
    def start(self, gpu_ids: list[int], attempt: int) -> list[Replica]:
        spec = self.spec
        per = int(spec.resources.gpus)  # whole GPUs per replica; a share (1/n) is one GPU
        size = len(gpu_ids) // per if spec.elastic and per else spec.replicas  # elastic: as GPUs allow
        roles = [("worker", i) for i in range(size)]
        roles += [("ps", i) for i in range(spec.parameter_servers)]
        ports = free_ports(len(roles)) if len(roles) > 1 else [0]
        workers = [f"127.0.0.1:{ports[i]}" for i in range(size)]
        ps = tuple(f"127.0.0.1:{ports[size + i]}" for i in range(spec.parameter_servers))
        topology = Topology(spec.framework, workers, "127.0.0.1", ports[0], ps)
        self.argv = spec.rendered_command()
        self.launch, self.lost, self.resizer = ElasticLaunch.of(spec, self.run.id), [], None
        if self.launch:  # torchrun agents, meeting at a store of their own
            self.argv = self.launch.agent_argv(self.argv)
            self.launch.start_store(self.base_env(), str(self.run.runner_log))
        mode = "a" if attempt > 1 or self.status.restarts else "w"  # a resumed run keeps its log
        replicas = []
        for role, index in roles:
            env = self.base_env()
            if self.launch:
                env.update(self.launch.replica_env(index, size))
            elif spec.replicas > 1 or spec.parameter_servers:
                if role == "worker":
                    env.update(replica_env(topology, index, local_rank=index))
                else:
                    env["TF_CONFIG"] = tf_config(topology, "ps", index)
            mine = gpu_ids[index * per : (index + 1) * per] if role == "worker" else []
            if is_fraction(spec.resources.gpus):
                mine = gpu_ids
                env["KUBELAB_GPU_FRACTION"] = f"{spec.resources.gpus:.6g}"
            replicas.append(self.spawn(role, index, env, mine, mode))
        self.status.replicas = [r.record(RUNNING) for r in replicas]
        if self.launch and self.allocator and ElasticLaunch.ledger_entry(spec):
            gpus_of = {i: gpu_ids[i * per : (i + 1) * per] for i in range(size)}
            self.resizer = Resizer(self, self.launch, self.allocator, gpus_of, gpu_ids)
        return replicas

    def spawn(self, role: str, index: int, env: dict[str, str], gpus: list[int], mode: str = "a") -> Replica:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
        with open(self.run.logs_dir / self.log_name(role, index), mode) as out:
            process = subprocess.Popen(
                self.argv,
                cwd=self.spec.workdir or None,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return Replica(role, index, process, open_pidfd(process.pid))

    def log_names(self) -> list[str]:
        workers = [self.log_name("worker", i) for i in range(self.spec.replicas)]
        return workers + [self.log_name("ps", i) for i in range(self.spec.parameter_servers)]

    log_name = staticmethod(RunDirectory.log_name)

    def base_env(self) -> dict[str, str]:
        return process_env(self.run, self.spec, self.status, self.environment)

    def watch(self, replicas: list[Replica]) -> tuple[str, int, bool] | None:
        """Wait for the replicas; None when all succeeded, else (reason, exit code, retryable)."""
        started = time.monotonic()
        deadline = started + self.spec.timeout if self.spec.timeout else None
        failure: tuple[str, int, bool] | None = None
        next_check = started + PREEMPTION_CHECK
        while True:
            if self.stop_requested():
                self.terminate(replicas)
                return ("stopped by user", self.exit_code(replicas), False)
            if self.resizer:
                self.resizer.settle()
            if self.allocator and time.monotonic() >= next_check:
                next_check = time.monotonic() + PREEMPTION_CHECK
                mark = self.preemption_mark(self.allocator, replicas)
                if mark is not None:  # SIGTERM: the trial saves a checkpoint within the grace
                    self.preempted_by = mark
                    self.terminate(replicas, self.spec.preemption_grace)
                    return ("preempted", self.exit_code(replicas), False)
            if deadline and time.monotonic() > deadline:
                self.terminate(replicas)
                return (f"timed out after {format_seconds(self.spec.timeout or 0)}", -1, False)
            done, exited = True, False
            for replica, record in zip(replicas, self.status.replicas, strict=True):
                code = replica.process.poll()
                if code is None:
                    done = False
                    continue
                if record["exit_code"] is None:
                    record.update(exit_code=code, state=SUCCEEDED if code == 0 else FAILED)
                    exited = True
                if code != 0 and failure is None and replica.label not in self.lost:
                    reason = f"{replica.label} {describe_exit(code)}"
                    if self.goes_on_without(replica, reason, replicas):
                        continue
                    exception = last_exception(self.run.logs_dir / self.log_name(replica.role, replica.index))
                    failure = (f"{reason}: {exception}" if exception else reason, code, True)
            if done and failure is None:
                return None  # the caller's move() writes the exit codes with the final state
            if exited:
                self.folder.write(lambda: self.run.write_status(self.status))
            if failure is not None:
                # One failed replica dooms a distributed job: stop the others, as torchrun does.
                self.terminate(replicas)
                return failure
            records = zip(replicas, self.status.replicas, strict=True)
            running = [replica for replica, record in records if record["exit_code"] is None]
            if all(r.pidfd is not None for r in running):
                select.select(
                    [r.pidfd for r in running if r.pidfd is not None], [], [], POLL
                )  # wakes at the first exit
            else:
                time.sleep(FAST_POLL if time.monotonic() - started < FAST_FOR else POLL)

    def preemption_mark(self, allocator: GpuAllocator, replicas: list[Replica]) -> dict[str, Any] | None:
        """A mark asking the whole run for its GPUs (an elastic run serves one for spare replicas)."""
        if self.resizer:
            return self.resizer.check(replicas)
        return allocator.preemption(str(self.run.path)) if self.spec.preemptible else None

    def goes_on_without(self, replica: Replica, reason: str, replicas: list[Replica]) -> bool:
        """An elastic run that still has `min` replicas goes on without this one, from its checkpoint."""
        running = sum(r.process.poll() is None for r in replicas)
        if self.launch is None or not self.launch.goes_on(running):
            return False
        self.lost.append(replica.label)
        self.status.restarts += 1  # a resize: the others start their scripts again
        step = resume_point(self.run, self.status.restarts)
        where = f"step {step}" if step >= 0 else "the start (no checkpoint)"
        self.log_all(f"kubelab: {reason}; {running} replica(s) go on from {where}\n")
        self.move(
            RUNNING, f"{reason}; {running} of {len(replicas)} replicas go on from {where}", size=running
        )
        return True

    def terminate(self, replicas: list[Replica], grace: float | None = None) -> None:
        """SIGTERM every replica's process group and the run's other descendants, SIGKILL what
        is left after the grace period."""
        keep = {r.process.pid for r in replicas}
        grace = stop_grace() if grace is None else grace
        stop_replicas(replicas, grace, lambda signum: end_descendants(signum, keep=keep))
        for replica, record in zip(replicas, self.status.replicas, strict=True):
            if record["exit_code"] is None:
                code = replica.process.returncode
                ended = PREEMPTED if self.preempted_by else STOPPED if self.stop_requested() else FAILED
                record.update(exit_code=code, state=ended)

    @staticmethod
    def exit_code(replicas: list[Replica]) -> int:
        codes = [r.process.returncode for r in replicas if r.process.returncode]
        return codes[0] if codes else 0

    def log_all(self, text: str) -> None:
        for path in self.run.logs_dir.glob("*.log"):
            with open(path, "a") as handle:
                handle.write(text)


# -- as a warm helper (kubelab.warm) ------------------------------------------------------------------
def preload() -> None:
    """What a runner needs ahead of its run: this module (imported by now), and the event-file
    writer, imported beside it: the helper can take a run while TensorBoard still imports
    (~0.15-0.5 s), which it needs only once its run reports metrics. Before, a cold CLI's
    sweep found both helpers still importing and started cold runners for its first trials,
    each paying the same import at its run's end."""
    threading.Thread(target=tfevents.preload, name="kubelab-preload", daemon=True).start()
    import psutil  # noqa: F401  (the system sampler's; ~10 ms paid while idle)


def log_of(path: Path) -> Path:
    return RunDirectory(path).runner_log


def serve(path: Path) -> bool:
    """Run one experiment in this warm process; True when the process may take another."""
    try:
        runner = Runner(RunDirectory(path))
    except Exception as exc:  # no readable spec: nothing was started
        print(f"kubelab runner: cannot run {path}: {exc}", file=sys.stderr)
        return False
    runner.main()
    return runner.reusable()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kubelab.backends.local.runner RUN_DIR", file=sys.stderr)
        return 2
    return Runner(RunDirectory(Path(args[0]))).main()


if __name__ == "__main__":
    sys.exit(main())
