"""Warm processes: pre-started, pre-imported kubelab helpers waiting for work.

Shared by the local backend (its runners) and sweeps (their drivers, which run on this machine
whatever the backend), so it lives beside `daemon.py` rather than in either.

A cold helper pays an interpreter start and its imports before it does anything: ~75 ms
for a runner (`kubelab.backends.local.runner`), ~350 ms for a sweep driver (Optuna). Sweeps of short
trials paid the runner's cost on every trial and the driver's before the first. So a
`$KUBELAB_HOME` keeps a few idle helpers per role and Python interpreter, in
`$KUBELAB_HOME/warm/<role>/<interpreter key>/`:

- runners (`KUBELAB_WARM_RUNNERS`, default 2; 0 turns them off): the local backend hands
  each run to one and tops the pool up. A runner whose run ended cleanly goes back to
  idle and serves the next run, so a sweep reuses the same few processes instead of
  starting one per trial. A server keeps this pool filled as it keeps the drivers' (below,
  the runners naming it their keeper); a CLI's or a sweep driver's submit tops it up
  without a keeper, for the next command within the idle timeout;
- drivers (`KUBELAB_WARM_DRIVERS`, default 1): a sweep is handed to one. Only a
  long-lived server keeps this pool filled (`SweepWatcher.keep_warm`), naming itself the
  *keeper*: an idle helper whose keeper died exits within a second (a stopped, culled or
  killed notebook server leaves no idle helper of its own behind); a CLI starts a driver
  only for the sweep it is creating, as it starts (`kubelab.sweeps.cli.start_early`), and
  hands it that sweep. A helper serving a run or a sweep finishes it whoever died:
  experiments outlive servers.

Each helper is detached in its own session, exactly like a cold one, and a role module
(`kubelab.backends.local.runner`, `kubelab.sweeps.driver`) gives three functions: `preload()` (the
imports to pay ahead), `log_of(path)` and `serve(path) -> bool` (True: may serve again).

The claim protocol (one winner, no locks):

- an idle helper opens its FIFO for reading *before* it is visible as `idle-<pid>.fifo`,
  so a visible FIFO without a reader means its helper died;
- a submitter claims one by `os.rename` to `claimed-<pid>.fifo` (atomic: one winner),
  opens it for writing non-blocking (ENXIO: the helper died, unlink it and try the next)
  and writes one JSON line `{"path", "env", "cwd"}`;
- the helper takes the submitter's environment and working directory from the message
  (trials see the submitter's environment, never the pool's), unlinks the FIFO, sends its
  output to the role's log for that path and serves it;
- after the role's idle timeout (`KUBELAB_WARM_RUNNER_IDLE`, default 60 s;
  `KUBELAB_WARM_DRIVER_IDLE`, default 600 s) an idle helper exits, but only if it can
  rename its own FIFO to `exiting-<pid>.fifo`; if that fails it was claimed just then, and
  it serves the claim.

`starting-<pid>` markers count helpers still importing, so concurrent top-ups do not
overfill the pool.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kubelab.pids import pid_alive

MESSAGE_WAIT = 5.0  # seconds a claimed helper waits for the rest of its message
LOOK_EVERY = 1.0  # seconds between an idle helper's checks that its FIFO still exists
STARTING_GRACE = 30.0  # seconds a starting marker counts without its helper appearing


@dataclass(frozen=True)
class Role:
    name: str
    module: str  # gives preload(), log_of(path), serve(path) -> bool
    size_variable: str
    size_default: int
    idle_variable: str
    idle_default: float

    def size(self) -> int:
        """How many idle helpers to keep (0 = off); a malformed setting means the default."""
        try:
            return max(0, int(os.environ.get(self.size_variable, self.size_default)))
        except ValueError:
            return self.size_default

    def idle_timeout(self) -> float:
        """Seconds an idle helper waits for work before exiting."""
        try:
            return float(os.environ.get(self.idle_variable, self.idle_default))
        except ValueError:
            return self.idle_default


RUNNER = Role(
    "runner", "kubelab.backends.local.runner", "KUBELAB_WARM_RUNNERS", 2, "KUBELAB_WARM_RUNNER_IDLE", 60.0
)
DRIVER = Role("driver", "kubelab.sweeps.driver", "KUBELAB_WARM_DRIVERS", 1, "KUBELAB_WARM_DRIVER_IDLE", 600.0)
ROLES = {role.name: role for role in (RUNNER, DRIVER)}


def pool_size() -> int:
    """How many idle runners to keep (`KUBELAB_WARM_RUNNERS`, default 2; 0 = off)."""
    return RUNNER.size()


class WarmPool:
    """The idle helpers of one role, for one kubelab home and this Python interpreter."""

    def __init__(self, home: Path, role: Role = RUNNER):
        # Keyed by interpreter: a warm helper must be the one a cold start would have used.
        key = hashlib.sha1(sys.executable.encode()).hexdigest()[:10]
        self.role = role
        self.path = Path(home) / "warm" / role.name / key

    # -- the submitter's side ---------------------------------------------------------
    def hand_over(self, target: Path, wait: float = 0.0) -> int | None:
        """Give `target` (a run or sweep directory) to an idle helper; its pid, or None. With
        `wait`, up to that many seconds for a helper still starting (a cold helper started
        instead would pay the same imports again)."""
        deadline = time.monotonic() + wait
        pid = self._hand_over(target)
        while pid is None and self.count() and time.monotonic() < deadline:
            time.sleep(0.01)
            pid = self._hand_over(target)
        return pid

    def _hand_over(self, target: Path) -> int | None:
        message = json.dumps({"path": str(target), "env": dict(os.environ), "cwd": os.getcwd()})
        for pid in self.idle():  # oldest first: they are the nearest to their idle timeout
            claimed = self.path / f"claimed-{pid}.fifo"
            try:
                os.rename(self.path / f"idle-{pid}.fifo", claimed)
            except FileNotFoundError:
                continue  # another submitter won it, or it timed out
            if send(claimed, message + "\n"):
                if pid_alive(pid):
                    return pid
                # Dying: SIGKILL made its main thread a zombie while another of its threads
                # still held the FIFO open, so the message went in but nobody will serve it.
                with contextlib.suppress(OSError):
                    claimed.unlink()
        return None

    def top_up(self, keeper: int | None = None) -> None:
        """Start helpers until the pool holds `role.size()` idle or starting ones; with a
        `keeper` pid, the ones started now exit when that process is gone."""
        wanted = self.role.size()
        if not wanted:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        have = self.count()
        for _ in range(wanted - have):
            from kubelab.daemon import start_module

            role = f"{self.role.name}@{keeper}" if keeper else self.role.name
            process = start_module("kubelab.warm", f"{role}:{self.path}", self.path / "pool.log")
            with contextlib.suppress(OSError):
                (self.path / f"starting-{process.pid}").touch()

    def count(self) -> int:
        """Idle helpers plus those still starting (stale starting markers are removed)."""
        total = 0
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return 0
        for name in names:
            if name.startswith("idle-"):
                total += 1
            elif name.startswith("starting-"):
                marker = self.path / name
                with contextlib.suppress(OSError):
                    if time.time() - marker.stat().st_mtime < STARTING_GRACE:
                        total += 1
                    else:
                        marker.unlink()
        return total

    def idle(self) -> list[int]:
        """Pids of the idle helpers."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return []
        return sorted(pid for pid in map(idle_pid, names) if pid is not None)


def idle_pid(name: str) -> int | None:
    """The pid in an `idle-<pid>.fifo` name, else None."""
    middle = name[len("idle-") : -len(".fifo")]
    if name.startswith("idle-") and name.endswith(".fifo") and middle.isdigit():
        return int(middle)
    return None


def send(fifo: Path, text: str) -> bool:
    """Write a claim message to a claimed FIFO; False (and the FIFO removed) if its helper is gone."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.ENOENT):
            with contextlib.suppress(OSError):
                fifo.unlink()
            return False
        raise
    try:
        os.set_blocking(fd, True)  # the environment may exceed the pipe's buffer
        data = text.encode()
        while data:
            data = data[os.write(fd, data) :]
        return True
    except BrokenPipeError:  # the helper died while reading
        with contextlib.suppress(OSError):
            fifo.unlink()
        return False
    finally:
        os.close(fd)


# -- the idle helper's side -------------------------------------------------------------
class IdleHelper:
    def __init__(self, role: Role, folder: Path, keeper: int | None = None):
        self.role = role
        self.folder = folder
        self.keeper = keeper
        self.pid = os.getpid()
        self.idle = folder / f"idle-{self.pid}.fifo"
        self.claimed = folder / f"claimed-{self.pid}.fifo"

    def main(self) -> int:
        module = importlib.import_module(self.role.module)
        module.preload()  # the imports a cold helper would pay for, paid now
        pool_out = os.dup(1)  # the pool's log, for the time between two claims
        while True:
            fd = self.listen()
            try:
                message = self.wait(fd)
            finally:
                os.close(fd)
                os.close(self.keep)
            for path in (self.idle, self.claimed, self.folder / f"exiting-{self.pid}.fifo"):
                with contextlib.suppress(OSError):
                    path.unlink()
            if message is None:
                return 0
            again = self.serve(module, message)
            redirect(pool_out)
            for signum in (signal.SIGTERM, signal.SIGINT):  # an idle helper dies on TERM again
                signal.signal(signum, signal.SIG_DFL)
            if not again or not self.folder.is_dir():
                return 0

    def listen(self) -> int:
        """Make the FIFO, open it, and only then show it as idle."""
        fresh = self.folder / f".new-{self.pid}.fifo"
        os.mkfifo(fresh, 0o600)
        fd = os.open(fresh, os.O_RDONLY | os.O_NONBLOCK)
        # Holding a write end too: the read side never sees end-of-file between writers.
        self.keep = os.open(fresh, os.O_WRONLY | os.O_NONBLOCK)
        os.rename(fresh, self.idle)
        with contextlib.suppress(OSError):
            (self.folder / f"starting-{self.pid}").unlink()
        return fd

    def wait(self, fd: int) -> dict[str, Any] | None:
        """The claim message, or None after the idle timeout (or when the pool was removed)."""
        deadline = time.monotonic() + self.role.idle_timeout()
        claimed = False
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, min(left, LOOK_EVERY)))
            if ready:
                return self.read(fd)
            if not self.idle.exists() and not self.claimed.exists():
                return None  # the pool folder was removed (a test's home, say)
            if not claimed and self.keeper and not pid_alive(self.keeper):
                deadline = time.monotonic()  # nobody keeps it warm any more: leave as at the timeout
            if time.monotonic() >= deadline:
                if claimed:
                    return None  # claimed, but the submitter died before writing
                try:
                    os.rename(self.idle, self.folder / f"exiting-{self.pid}.fifo")
                    return None
                except FileNotFoundError:
                    claimed, deadline = True, time.monotonic() + MESSAGE_WAIT  # serve it

    def read(self, fd: int) -> dict[str, Any] | None:
        data = b""
        deadline = time.monotonic() + MESSAGE_WAIT
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None  # the submitter died mid-message; it started nothing through us
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    data += os.read(fd, 1 << 16)
        try:
            message = json.loads(data)
        except ValueError:
            return None
        return message if isinstance(message, dict) and isinstance(message.get("path"), str) else None

    def serve(self, module: ModuleType, message: dict[str, Any]) -> bool:
        """Serve one claim in the submitter's environment and working directory."""
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in (message.get("env") or {}).items()})
        with contextlib.suppress(OSError):
            os.chdir(message.get("cwd") or "/")
        target = Path(message["path"])
        try:
            log = os.open(module.log_of(target), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            return True  # no such run or sweep: nothing was started, stay available
        redirect(log)
        os.close(log)
        return bool(module.serve(target))


def redirect(fd: int) -> None:
    """Point stdout and stderr at `fd`."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    head, _, folder = (args[0] if len(args) == 1 else "").partition(":")
    role, _, keeper = head.partition("@")
    if role not in ROLES or not folder or not (keeper.isdigit() or keeper == ""):
        print(
            "usage: python -m kubelab.warm ROLE[@KEEPER_PID]:POOL_DIR (ROLE: runner or driver)",
            file=sys.stderr,
        )
        return 2
    return IdleHelper(ROLES[role], Path(folder), int(keeper) if keeper else None).main()


if __name__ == "__main__":
    sys.exit(main())
