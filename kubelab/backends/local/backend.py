"""The local backend: experiments as processes on this machine.

Each experiment gets a detached runner (`kubelab.backends.local.runner`); this class starts runners,
signals them, and re-attaches after restarts. GPUs are shared through the
machine-wide `GpuAllocator`, so the CLI, servers and users never hand one out twice.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.backends.base import Backend
from kubelab.backends.local.processes import signal_group, stop_grace
from kubelab.backends.local.resume import reopen_stopped
from kubelab.daemon import start_module
from kubelab.errors import FieldError, ValidationError
from kubelab.log_times import Times, stamped
from kubelab.logfiles import byte_range, decoder, read_bytes
from kubelab.pids import pid_alive, process_start_time
from kubelab.priorities import CAP_ENV, over_cap, priority_name
from kubelab.records import FAILED, RunDirectory, Status, parse_iso
from kubelab.spec import ExperimentSpec
from kubelab.warm import WarmPool, pool_size

if TYPE_CHECKING:  # the allocator's module (~20 ms of imports) only where GPUs are asked about
    from kubelab.backends.local.gpus import GpuAllocator

STARTUP_GRACE = 30.0  # seconds a new runner may take to record its pid
STARTING_WAIT = 2.0  # seconds a submit waits for a warm runner still importing (a cold one would too)


class LocalBackend(Backend):
    name = "local"

    def __init__(self, allocator: GpuAllocator | None = None):
        self._allocator = allocator

    @property
    def allocator(self) -> GpuAllocator:
        if self._allocator is None:
            from kubelab.backends.local.gpus import GpuAllocator

            self._allocator = GpuAllocator()
        return self._allocator

    def submit(self, run: RunDirectory, spec: ExperimentSpec) -> None:
        """Hand the run to a warm runner (`kubelab.warm`), else start a cold one and top the
        pool up (detached, not waited for: the next submit finds it warm).

        No top-up after a hand-over: runners come back to the pool when their run ends, so
        a sweep keeps reusing the same few instead of starting new ones beside its trials.
        """
        capped = over_cap(spec.priority, os.environ.get(CAP_ENV))  # the hub's group cap
        if capped is not None:
            raise ValidationError("priority is above your group's cap", [capped])
        indices = spec.resources.gpu_indices
        if indices is not None:
            have = [gpu.index for gpu in self.allocator.gpus]
            missing = [index for index in indices if index not in have]
            if missing:
                listed = f"GPUs {', '.join(map(str, have))}" if have else "no GPUs"
                raise ValidationError(
                    "cannot run this experiment on this machine",
                    [FieldError("resources.gpu_indices", f"this machine has {listed}, not {missing[0]}")],
                )
        if not pool_size():
            start_module("kubelab.backends.local.runner", str(run.path), run.runner_log)
            return
        pool = WarmPool(run.path.parent.parent)  # <home>/runs/<id>
        if pool.hand_over(run.path, wait=STARTING_WAIT) is None:
            start_module("kubelab.backends.local.runner", str(run.path), run.runner_log)
            pool.top_up()

    def resume(self, run: RunDirectory) -> None:
        """The run back to Queued (`reopen_stopped`), then a runner for it as for a submit."""
        reopen_stopped(run)
        self.submit(run, ExperimentSpec.parse(run.spec()))

    def makes_environments(self) -> bool:
        """The runner does them, before it asks for GPUs (`kubelab.environments.prepare`)."""
        return True

    def warm_up(self, home: Path, keeper: int | None = None) -> None:
        """Fill the warm-runner pool of `home` ahead of the first submit (servers and sweep drivers
        do); the idle runners started for a `keeper` (a server) leave within a second of its end."""
        if pool_size():
            WarmPool(home).top_up(keeper)

    def stop_grace(self) -> float:
        """A stopped run's runner waits this long between SIGTERM and SIGKILL (`KUBELAB_STOP_GRACE`)."""
        return stop_grace()

    def runner_alive(self, status: Status) -> bool:
        pid = status.runner_pid
        if not pid_alive(pid):
            return False
        started = process_start_time(pid) if pid else None
        return status.runner_started is None or started is None or started == status.runner_started

    def stop(self, run: RunDirectory, pruned: bool = False) -> None:
        run.request_stop(pruned)
        status = run.status()
        if status.terminal:
            return
        if self.runner_alive(status):
            # The runner sees the stop file within its poll (50 ms) and stops its replicas. No
            # signal: a warm runner may have moved on to another run by the time one arrives.
            return
        if status.runner_pid is None:
            return  # not started yet: the runner will see the stop request and end at once
        self.kill_orphans(status)
        status.move(*run.stop_outcome())
        run.write_status(status)

    def kill_orphans(self, status: Status) -> None:
        """Replicas whose runner died: TERM, a grace period, then KILL."""
        groups = [r["pid"] for r in status.replicas if r.get("exit_code") is None and r.get("pid")]
        for pgid in groups:
            signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + stop_grace()
        while time.monotonic() < deadline and any(pid_alive(p) for p in groups):
            time.sleep(0.05)
        for pgid in groups:
            signal_group(pgid, signal.SIGKILL)

    def reconcile(self, run: RunDirectory, status: Status) -> Status:
        if status.terminal or self.runner_alive(status):
            return status
        if status.runner_pid is None:
            # Since the submit, or the resume that queued it again.
            since = max([run.spec_file.stat().st_mtime] + [parse_iso(t.at) for t in status.history[-1:]])
            age = time.time() - since
            if age < STARTUP_GRACE:
                return status
        # Re-read: the runner may have written its final status after we looked.
        status = run.status()
        if status.terminal:
            return status
        self.kill_orphans(status)
        if run.stop_file.exists():
            status.move(*run.stop_outcome())
        else:
            status.move(FAILED, "the runner process ended without a final status (machine restart?)")
        run.write_status(status)
        return status

    def logs(
        self,
        run: RunDirectory,
        replica: int = 0,
        follow: bool = False,
        start: int = 0,
        idle: bool = False,
        timestamps: bool = False,
    ) -> Iterator[str]:
        if timestamps:
            times = Times(run.log_file(replica))
            return byte_range(stamped(self._logs(run, replica, follow, 0, idle), times.at), start)
        return self._logs(run, replica, follow, start, idle)

    def _logs(self, run: RunDirectory, replica: int, follow: bool, start: int, idle: bool) -> Iterator[str]:
        path, offset, text = run.log_file(replica), start, decoder()
        while True:
            # Look at the state before reading: a run that had ended has all its output on disk.
            finished = not follow or run.status().terminal
            data = read_bytes(path, offset)
            if data:
                offset += len(data)
                if chunk := text.decode(data):
                    yield chunk
            elif finished:
                if tail := text.decode(b"", final=True):
                    yield tail
                return
            elif idle:
                yield ""  # nothing new: the caller waits its own way (the server, without a thread)
            else:
                time.sleep(0.1)

    def resources(self) -> dict[str, Any]:
        snapshot = self.allocator.snapshot()
        return {"backend": self.name, "gpus": snapshot}

    def preview(self, spec: ExperimentSpec) -> dict[str, Any]:
        """The ledger's answer for a run of `spec` (kubelab/backends/local/placement.py), each
        run it would preempt or shrink named by id and name."""
        from kubelab.backends.local.placement import request
        from kubelab.backends.local.resume import run_name

        counts = request(spec)
        try:
            found = self.allocator.preview(counts[0], spec.priority, spec.resources.gpu_type, counts[1:])
        except ValueError as exc:  # more than this machine has
            raise ValidationError("cannot be scheduled", [FieldError("gpus", str(exc))]) from None
        for change in found["changes"]:
            key = Path(change.pop("run"))
            change.update(id=key.name, name=run_name(key), priority=priority_name(change["priority"]))
        return {"backend": self.name, **found}

    def render(self, spec: ExperimentSpec, run_id: str) -> list[dict[str, Any]]:
        """The processes the runner would start, one entry per replica."""
        from kubelab.backends.distributed import Topology, replica_env

        workers = [f"127.0.0.1:<port{i}>" for i in range(spec.replicas)]
        topology = Topology(spec.framework, workers, "127.0.0.1", 0, ())
        argv = spec.rendered_command()
        return [
            {
                "kind": "Process",
                "replica": rank,
                "argv": argv,
                "cwd": spec.workdir,
                "gpus": spec.resources.gpus,
                "env": {
                    **spec.env,
                    "KUBELAB_RUN_ID": run_id,
                    **(replica_env(topology, rank, rank) if spec.replicas > 1 else {}),
                },
            }
            for rank in range(spec.replicas)
        ]
