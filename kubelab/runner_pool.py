"""Warm runners: a few pre-started, pre-imported runner processes waiting for a run.

A cold runner costs an interpreter start and kubelab's imports (~75 ms) before it can
start a trial; sweeps of short trials pay that on every trial. So the local backend keeps
up to `KUBELAB_WARM_RUNNERS` (default 2, 0 turns the pool off) idle runners per
`$KUBELAB_HOME` and Python interpreter, in `$KUBELAB_HOME/runners/<key>/`. Each is
detached in its own session, exactly like a cold runner, and becomes an ordinary
`Runner` once handed a run.

The claim protocol (one winner, no locks):

- an idle runner opens its FIFO for reading *before* it is visible as `idle-<pid>.fifo`,
  so a visible FIFO without a reader means its runner died;
- a submitter claims one by `os.rename` to `claimed-<pid>.fifo` (atomic: one winner),
  opens it for writing non-blocking (ENXIO: the runner died, unlink it and try the next)
  and writes one JSON line `{"run", "env", "cwd"}`;
- the runner takes the submitter's environment and working directory from the message
  (trials see the submitter's environment, never the pool's), unlinks the FIFO and runs
  `Runner(run).main()`, its output going to the run's `logs/runner.log`;
- after `KUBELAB_WARM_RUNNER_IDLE` seconds (default 60) an idle runner exits, but only if
  it can rename its own FIFO to `exiting-<pid>.fifo`; if that fails it was claimed just
  then, and it serves the run.

`starting-<pid>` markers count runners still importing, so concurrent top-ups do not
overfill the pool.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import select
import sys
import time
from pathlib import Path

IDLE_DEFAULT = 60.0
SIZE_DEFAULT = 2
MESSAGE_WAIT = 5.0  # seconds a claimed runner waits for the rest of its message
LOOK_EVERY = 1.0  # seconds between an idle runner's checks that its FIFO still exists
STARTING_GRACE = 30.0  # seconds a starting marker counts without its runner appearing


def pool_size() -> int:
    """How many idle runners to keep (`KUBELAB_WARM_RUNNERS`, default 2; 0 = off)."""
    try:
        return max(0, int(os.environ.get("KUBELAB_WARM_RUNNERS", SIZE_DEFAULT)))
    except ValueError:
        return SIZE_DEFAULT


def idle_timeout() -> float:
    """Seconds an idle runner waits for a run before exiting (`KUBELAB_WARM_RUNNER_IDLE`)."""
    try:
        return float(os.environ.get("KUBELAB_WARM_RUNNER_IDLE", IDLE_DEFAULT))
    except ValueError:
        return IDLE_DEFAULT


class RunnerPool:
    """The pool of one kubelab home, for this Python interpreter."""

    def __init__(self, home: Path):
        # Keyed by interpreter: a warm runner must be the one a cold start would have used.
        key = hashlib.sha1(sys.executable.encode()).hexdigest()[:10]
        self.path = Path(home) / "runners" / key

    @classmethod
    def of_run(cls, run_path: Path) -> RunnerPool:
        """The pool of the home a run directory (`<home>/runs/<id>`) belongs to."""
        return cls(Path(run_path).parent.parent)

    # -- the submitter's side ---------------------------------------------------------
    def hand_over(self, run_path: Path) -> int | None:
        """Give the run to an idle runner; its pid, or None when none could take it."""
        message = json.dumps({"run": str(run_path), "env": dict(os.environ), "cwd": os.getcwd()})
        for pid in self.idle():  # oldest first: they are the nearest to their idle timeout
            claimed = self.path / f"claimed-{pid}.fifo"
            try:
                os.rename(self.path / f"idle-{pid}.fifo", claimed)
            except FileNotFoundError:
                continue  # another submitter won it, or it timed out
            if send(claimed, message + "\n"):
                return pid
        return None

    def top_up(self) -> None:
        """Start warm runners until the pool holds `pool_size()` idle or starting ones."""
        wanted = pool_size()
        if not wanted:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        have = self.count()
        for _ in range(wanted - have):
            from kubelab.detached import start_module

            process = start_module("kubelab.runner_pool", str(self.path), self.path / "pool.log")
            with contextlib.suppress(OSError):
                (self.path / f"starting-{process.pid}").touch()

    def count(self) -> int:
        """Idle runners plus those still starting (stale starting markers are removed)."""
        total = 0
        for name in os.listdir(self.path):
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
        """Pids of the idle runners."""
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
    """Write a claim message to a claimed FIFO; False (and the FIFO removed) if its runner is gone."""
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
    except BrokenPipeError:  # the runner died while reading
        with contextlib.suppress(OSError):
            fifo.unlink()
        return False
    finally:
        os.close(fd)


# -- the idle runner's side -------------------------------------------------------------
class IdleRunner:
    def __init__(self, folder: Path):
        self.folder = folder
        self.pid = os.getpid()
        self.idle = folder / f"idle-{self.pid}.fifo"
        self.claimed = folder / f"claimed-{self.pid}.fifo"

    def main(self) -> int:
        import kubelab.runner  # noqa: F401  the imports a cold runner would pay for, paid now

        fd = self.listen()
        try:
            message = self.wait(fd)
        finally:
            os.close(fd)
        for path in (self.idle, self.claimed, self.folder / f"exiting-{self.pid}.fifo"):
            with contextlib.suppress(OSError):
                path.unlink()
        if message is None:
            return 0
        return self.serve(message)

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

    def wait(self, fd: int) -> dict | None:
        """The claim message, or None after the idle timeout (or when the pool was removed)."""
        deadline = time.monotonic() + idle_timeout()
        claimed = False
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, min(left, LOOK_EVERY)))
            if ready:
                return self.read(fd)
            if not self.idle.exists() and not self.claimed.exists():
                return None  # the pool folder was removed (a test's home, say)
            if time.monotonic() >= deadline:
                if claimed:
                    return None  # claimed, but the submitter died before writing
                try:
                    os.rename(self.idle, self.folder / f"exiting-{self.pid}.fifo")
                    return None
                except FileNotFoundError:
                    claimed, deadline = True, time.monotonic() + MESSAGE_WAIT  # serve it

    def read(self, fd: int) -> dict | None:
        data = b""
        deadline = time.monotonic() + MESSAGE_WAIT
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None  # the submitter died mid-message; it started no runner through us
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    data += os.read(fd, 1 << 16)
        try:
            message = json.loads(data)
        except ValueError:
            return None
        return message if isinstance(message, dict) else None

    def serve(self, message: dict) -> int:
        """Become the run's runner, in the submitter's environment and working directory."""
        from kubelab.records import RunDirectory
        from kubelab.runner import Runner

        os.close(self.keep)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in (message.get("env") or {}).items()})
        with contextlib.suppress(OSError):
            os.chdir(message.get("cwd") or "/")
        run = RunDirectory(Path(message["run"]))
        log = os.open(run.logs_dir / "runner.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        return Runner(run).main()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m kubelab.runner_pool POOL_DIR", file=sys.stderr)
        return 2
    return IdleRunner(Path(args[0])).main()


if __name__ == "__main__":
    sys.exit(main())
