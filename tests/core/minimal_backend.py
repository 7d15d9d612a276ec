"""A third backend, deliberately small, registered the way a third party's is: an entry point of the
group `kubelab.backends` (tests/core/test_minimal_backend.py installs it) naming `MinimalBackend`.

Each replica is a plain subprocess of whoever submits, in its own session, with the trial's
contract (docs/architecture.md, "Adding a backend"); a shell around it writes its exit code into the run directory,
so any process that asks later (the CLI, a sweep's or pipeline's driver, the server) learns how it
ended. No runner, no GPUs, no retries, no timeout, no line times: only the abstract methods of
`Backend`, and none of its optional hooks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubelab.backends.base import Backend
from kubelab.backends.trial_env import trial_env
from kubelab.errors import FieldError, ValidationError
from kubelab.logfiles import read_from
from kubelab.pids import pid_alive
from kubelab.records import FAILED, RUNNING, SUCCEEDED, RunDirectory, Status
from kubelab.shims import SHIMS
from kubelab.spec import ExperimentSpec

WRAPPER = '"$@"; echo $? > "$0"'  # sh -c WRAPPER EXIT_FILE ARGV...: the command's exit code, kept


def exit_file(run: RunDirectory, replica: int) -> str:
    return str(run.path / f"exit-code-{replica}")


class MinimalBackend(Backend):
    name = "minimal"

    def submit(self, run: RunDirectory, spec: ExperimentSpec) -> None:
        if spec.resources.gpus:
            raise ValidationError(
                "no GPUs here", [FieldError("resources.gpus", "the minimal backend has none")]
            )
        status = run.status()
        run.logs_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **spec.env, **self.trial_env(run, spec, status)}
        status.replicas = []
        for replica in range(spec.replicas):
            env.update(RANK=str(replica), WORLD_SIZE=str(spec.replicas))
            with open(run.log_file(replica), "wb") as log:
                process = subprocess.Popen(
                    ["/bin/sh", "-c", WRAPPER, exit_file(run, replica), *spec.rendered_command()],
                    cwd=spec.workdir or None,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            status.replicas.append({"index": replica, "pid": process.pid, "exit_code": None})
            threading.Thread(target=self.reap, args=(process, run), daemon=True).start()
        status.move(RUNNING, f"running {spec.replicas} plain subprocess(es)")
        run.write_status(status)

    @staticmethod
    def trial_env(run: RunDirectory, spec: ExperimentSpec, status: Status) -> dict[str, str]:
        """The trial's contract, as every backend gives it, and this interpreter's `python`."""
        env = trial_env(
            run,
            spec,
            code=True,
            shims=str(SHIMS),
            python_path=os.environ.get("PYTHONPATH"),
            sweep=status.sweep,
            trial=status.trial,
            platform="minimal",
        )
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
        return env

    def reap(self, process: subprocess.Popen[bytes], run: RunDirectory) -> None:
        """While the submitter lives it learns of the end at once (and leaves no zombie)."""
        process.wait()
        self.reconcile(run, run.status())

    def reconcile(self, run: RunDirectory, status: Status) -> Status:
        if status.terminal or not status.replicas:
            return status
        alive = [pid_alive(r["pid"]) for r in status.replicas]  # before the exit files: no race
        codes: list[int | None] = []
        for replica in status.replicas:
            try:
                codes.append(int(Path(exit_file(run, replica["index"])).read_text()))
            except (OSError, ValueError):
                codes.append(None)
        if any(alive) and None in codes:
            return status
        status = run.status()  # re-read: another process may have recorded the end meanwhile
        if status.terminal:
            return status
        for replica, code in zip(status.replicas, codes, strict=True):
            replica["exit_code"] = code
        if None in codes and run.stop_file.exists():
            status.move(*run.stop_outcome())
        elif None in codes:  # killed before its shell could write a code, and not by a stop
            status.move(FAILED, "a replica was killed")
        elif any(codes):
            code = next(c for c in codes if c)
            status.move(FAILED, f"a replica exited {code}", code)
        else:
            status.move(SUCCEEDED, "exited 0", 0)
        run.write_status(status)
        return status

    def stop(self, run: RunDirectory, pruned: bool = False) -> None:
        run.request_stop(pruned)
        status = run.status()
        if status.terminal:
            return
        for replica in status.replicas:
            try:
                os.killpg(replica["pid"], signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                continue
        status.move(*run.stop_outcome())
        run.write_status(status)

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
            raise ValidationError(
                "no line times", [FieldError("timestamps", "the minimal backend keeps none")]
            )
        offset = start
        while True:
            finished = not follow or self.reconcile(run, run.status()).terminal
            text, offset = read_from(run.log_file(replica), offset)
            if text:
                yield text
            elif finished:
                return
            elif idle:
                yield ""
            else:
                time.sleep(0.05)

    def resources(self) -> dict[str, Any]:
        return {"backend": self.name, "gpus": {}}

    def render(self, spec: ExperimentSpec, run_id: str) -> list[dict[str, Any]]:
        argv = spec.rendered_command()
        return [{"kind": "Subprocess", "replica": r, "argv": argv} for r in range(spec.replicas)]
