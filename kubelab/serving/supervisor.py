"""A service's supervisor: one detached process per service keeping its replicas up.

`python -m kubelab.serving.supervisor SERVICE_DIR` holds the folder's `driver.lock`, starts
each replica in its own process group (asked to die with the supervisor), polls each one's
readiness (its health path, or its port accepting), and writes `state.json` on every change.
A replica that ends *before* it ever answered fails the whole service with the last error line
of its log as the reason (a model that does not load, a predictor raising in `load`, a port
taken): restarting it would only repeat the error. One that ends after answering is restarted
after a backoff (1 s, doubling to 30 s). A stop request (the `stop-requested` file) or SIGTERM
stops every replica's group, SIGTERM then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from kubelab.records import utcnow
from kubelab.serving.replicas import launch, port_in_use
from kubelab.serving.spec import ServiceSpec
from kubelab.serving.store import (
    ENDED,
    FAILED,
    READY,
    RESTARTING,
    RUNNING,
    STARTING,
    STOPPED,
    Replica,
    ServiceDirectory,
)

POLL = 0.05  # seconds between looks: how fast a stop request or a ready replica is seen
BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
GRACE = 5.0  # seconds between SIGTERM and SIGKILL on stop
ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:?.*$")


def startup_timeout() -> float:
    raw = os.environ.get("KUBELAB_SERVICE_STARTUP_TIMEOUT", "")
    return float(raw) if raw.replace(".", "", 1).isdigit() and float(raw) > 0 else 300.0


def error_line(log: Any, limit: int = 500) -> str:
    """The last exception line of a log (a traceback's last line), else its last line."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 65536))
            lines = [line.strip() for line in handle.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    found = next((line for line in reversed(lines) if ERROR_LINE.match(line)), None)
    return (found or (lines[-1] if lines else ""))[:limit]


def answering(port: int, path: str | None) -> bool:
    """Readiness: `path` answers 200 over HTTP, or (no path) the port accepts a connection."""
    if path is None:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", port)) == 0
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except (OSError, ValueError):  # ValueError: a path http.client refuses
        return False
    finally:
        connection.close()


def _die_with_supervisor() -> None:
    """In the replica, before exec: the kernel sends SIGTERM when the supervisor dies (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Supervisor:
    def __init__(self, directory: ServiceDirectory):
        self.directory = directory
        self.record = directory.spec_data()
        self.spec = ServiceSpec.parse(self.record["spec"])
        self.state = directory.state()
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.restart_at: dict[int, float] = {}
        self.deadline: dict[int, float] = {}
        self.terminated = False

    def run(self) -> int:
        with self.directory.driver_lock() as mine:
            if not mine:
                return 0  # another supervisor holds this service
            signal.signal(signal.SIGTERM, self._on_sigterm)
            self.state.supervisor_pid = os.getpid()
            self.state.replicas = [Replica(index=i) for i in range(max(self.spec.replicas.min, 1))]
            for replica in self.state.replicas:
                if self.state.state not in ENDED:
                    self.start(replica)
            self.save()
            while self.state.state not in ENDED:
                if self.terminated or self.directory.stop_requested() or not self.directory.exists():
                    self.end(STOPPED, "stopped on request")
                    break
                if self.turn():
                    self.save()
                time.sleep(POLL)
            return 0

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.terminated = True

    def save(self) -> None:
        self.directory.write_state(self.state)

    def start(self, replica: Replica) -> None:
        try:
            plan = launch(self.directory, self.record, replica.index)
        except OSError as exc:
            self.end(FAILED, f"replica {replica.index} could not be prepared: {exc}")
            return
        # checked at the first start only: a crashed replica's closed connections may hold its
        # fixed port a while (TIME_WAIT), which servers binding with SO_REUSEADDR do not mind
        if self.spec.ports and not replica.restarts and port_in_use(plan.port):
            self.end(FAILED, f"ports[0]: port {plan.port} is already in use on this machine")
            return
        try:
            with open(self.directory.replica_log(replica.index), "ab") as log:
                process = subprocess.Popen(
                    plan.argv,
                    cwd=plan.cwd,
                    env=plan.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_supervisor,
                )
        except (OSError, ValueError) as exc:  # no such program or folder; a value Popen refuses
            why = getattr(exc, "strerror", None) or str(exc)
            field = "env" if "environment" in why else "folder" if self.spec.serves_model else "command"
            self.end(FAILED, f"{field}: cannot start {plan.argv[0]!r} in {plan.cwd}: {why}")
            return
        self.processes[replica.index] = process
        replica.pid, replica.port, replica.state = process.pid, plan.port, STARTING
        replica.started_at, replica.exit_code = utcnow(), None
        self.deadline[replica.index] = time.monotonic() + startup_timeout()

    def turn(self) -> bool:
        """One look at every replica; True when something changed."""
        now, changed = time.monotonic(), False
        for replica in self.state.replicas:
            before = (replica.state, replica.pid)
            self.look(replica, now)
            changed |= before != (replica.state, replica.pid)
            if self.state.state in ENDED:
                return True
        ready = sum(r.state == READY for r in self.state.replicas)
        total = len(self.state.replicas)
        if ready:
            state, reason = RUNNING, "" if ready == total else f"{ready} of {total} replicas ready"
        else:
            waiting = [r for r in self.state.replicas if r.state == RESTARTING]
            state = STARTING
            reason = f"replica {waiting[0].index} restarting" if waiting else "starting"
        if (state, reason) != (self.state.state, self.state.reason):
            self.state.state, self.state.reason, changed = state, reason, True
            if state == RUNNING and self.state.ready_at is None:
                self.state.ready_at = utcnow()
        return changed

    def look(self, replica: Replica, now: float) -> None:
        index = replica.index
        if replica.state == RESTARTING:
            if now >= self.restart_at[index]:
                self.start(replica)
            return
        code = self.processes[index].poll()
        if code is not None:
            replica.exit_code, replica.pid = code, None
            if replica.ready_at is None:
                line = error_line(self.directory.replica_log(index))
                line = line or f"replica {index} ended with exit code {code} before it answered"
                self.end(FAILED, line)
            else:
                replica.restarts += 1
                replica.state = RESTARTING
                self.restart_at[index] = now + BACKOFF[min(replica.restarts, len(BACKOFF)) - 1]
        elif replica.state == STARTING:
            if answering(replica.port, self.spec.readiness_path):
                replica.state, replica.ready_at = READY, utcnow()
            elif now > self.deadline[index]:
                where = self.spec.readiness_path or f"port {replica.port}"
                tail = error_line(self.directory.replica_log(index))
                late = f"replica {index} did not answer on {where} in {startup_timeout():g} s"
                self.end(FAILED, f"{late}: {tail}")

    def end(self, state: str, reason: str) -> None:
        """Stop every replica's process group (SIGTERM, then SIGKILL) and record the end."""
        running = [p for p in self.processes.values() if p.poll() is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE
        while any(p.poll() is None for p in running) and time.monotonic() < deadline:
            time.sleep(POLL)
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # anything left in its group
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(1.0)
        for replica in self.state.replicas:
            replica.pid = None
            if replica.state != FAILED:
                replica.state = STOPPED
        self.state.state, self.state.reason, self.state.finished_at = state, reason, utcnow()
        if self.directory.path.is_dir():  # not when its folder was deleted under it
            self.save()


def main(argv: list[str] | None = None) -> int:
    """`python -m kubelab.serving.supervisor SERVICE_DIR`."""
    from pathlib import Path

    args = sys.argv[1:] if argv is None else argv
    return Supervisor(ServiceDirectory(Path(args[0]))).run()


if __name__ == "__main__":
    sys.exit(main())
