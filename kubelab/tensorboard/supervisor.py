"""TensorBoard sessions: one supervised TensorBoard process per set of run directories.

A session is asked for by experiments, a sweep, a PQL query or the whole project; it
resolves to a set of logdirs (`name -> run's tensorboard/`), and the same set always
gives the same session id, so asking again reuses the running process.

No TensorBoard may outlive the process that started it. Three layers see to it:
`stop_all()` on an orderly stop (the Jupyter extension's `stop_extension` and `atexit`),
`PR_SET_PDEATHSIG` in the child (Linux; the kernel signals it when its parent dies, even by
SIGKILL), and a watchdog thread in the child that exits once its parent pid is gone (for
systems without pdeathsig, and for the race where the parent died before the prctl).
The child is `python -m kubelab.tensorboard.supervisor --parent PID -- <tensorboard flags>`;
its secrets (the capability in its path prefix, the proxy's token) come on its stdin, never
its command line (`kubelab.tensorboard.private`).
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, NotFound, TooMany, ValidationError
from kubelab.options import TENSORBOARD_SOURCES, tensorboard_source
from kubelab.records import RunDirectory
from kubelab.tensorboard.private import read_secrets, secrets_message, serve
from kubelab.tensorboard.session import (
    FAILED,
    RUNNING,
    STARTING,
    STOPPED,
    TensorBoardSession,
    logdir_spec,
    run_label,
    session_id,
)

SOURCES = TENSORBOARD_SOURCES
DEFAULT_IDLE_TIMEOUT = 30 * 60.0  # seconds without a proxied request before a session stops
STOP_GRACE = 3.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


DEFAULT_MAX_SESSIONS = 4


def _env_limit(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


class TensorBoardSupervisor:
    """Starts, reuses, watches and stops the sessions of one `Experiments`."""

    def __init__(
        self,
        lab: Any,
        base_url: str = "/",
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        on_change: Callable[[TensorBoardSession], None] | None = None,
        max_sessions: int | None = None,
        guard: bool = False,
    ):
        """`guard`: a Jupyter server proxies the sessions, so each TensorBoard answers only
        requests carrying its session's proxy token (without one, a browser reaches it directly)."""
        self.lab = lab
        base = "/" + "/".join(p for p in (base_url.strip("/"),) if p)
        self.prefix_root = base.rstrip("/") + "/kubelab/tensorboard"
        self.view_root = base.rstrip("/") + "/kubelab/tensorboard-view"
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions or _env_limit("KUBELAB_MAX_TENSORBOARDS", DEFAULT_MAX_SESSIONS)
        self.on_change = on_change or (lambda session: None)
        self.guard = guard
        self.sessions: dict[str, TensorBoardSession] = {}
        self.log_dir = Path(lab.home) / "tensorboard-sessions"
        self._lock = threading.RLock()
        atexit.register(self.stop_all)

    # -- asking for a session -----------------------------------------------------------
    def resolve(self, request: Any) -> tuple[dict[str, str], dict[str, Any]]:
        """The logdirs a request names, and the request in its normal form."""
        kind, value = tensorboard_source(request)
        if kind == "experiments":
            records = self._experiments(value)
        elif kind == "sweep":
            if not isinstance(value, str) or not value:
                raise ValidationError("invalid TensorBoard request", [FieldError("sweep", "must be an id")])
            records = self._matching(
                f'sweep:"{value}"', "sweep", f"sweep '{value}' has no trials (or does not exist)"
            )
            records.sort(key=lambda r: (r.get("trial") is None, r.get("trial") or 0))
        elif kind == "query":
            if not isinstance(value, str) or not value.strip():
                raise ValidationError("invalid TensorBoard request", [FieldError("query", "must be PQL")])
            records = self._matching(value, "query", f"no experiment matches '{value}'")
        else:
            if value is not True:
                raise ValidationError("invalid TensorBoard request", [FieldError("project", "must be true")])
            records = self._matching("", "project", "the project has no experiments yet")
        return self._logdirs(records), {kind: value}

    def _experiments(self, ids: Any) -> list[dict[str, Any]]:
        if isinstance(ids, str):
            ids = [ids]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ValidationError(
                "invalid TensorBoard request",
                [FieldError("experiments", "must be a non-empty list of experiment ids")],
            )
        records, missing = [], []
        for index, run_id in enumerate(dict.fromkeys(ids)):
            try:
                records.append(self.lab.get(run_id))
            except NotFound:
                missing.append(FieldError(f"experiments[{index}]", f"no experiment '{run_id}'"))
        if missing:
            raise NotFound("no such experiment", missing)
        return records

    def _matching(self, query: str, path: str, empty: str) -> list[dict[str, Any]]:
        try:
            records, _ = self.lab.list(query)
        except ValidationError as exc:
            raise ValidationError(exc.detail, [FieldError(path, f.reason) for f in exc.fields]) from None
        if not records:
            raise NotFound(empty, [FieldError(path, "matches no experiments")])
        return sorted(records, key=lambda r: r["id"])

    def _logdirs(self, records: list[dict[str, Any]]) -> dict[str, str]:
        logdirs: dict[str, str] = {}
        for record in records:
            path = str(RunDirectory(self.lab.runs_root / record["id"]).tensorboard_dir)
            if "," in path:
                raise ValidationError(
                    "cannot start TensorBoard",
                    [FieldError("KUBELAB_HOME", f"'{path}' holds a comma, which --logdir_spec cannot take")],
                )
            name = run_label(record)
            if name in logdirs:
                name = f"{name}-{record['id']}"
            logdirs[name] = path
        return logdirs

    def start(
        self, request: Any, resolved: tuple[dict[str, str], dict[str, Any]] | None = None
    ) -> TensorBoardSession:
        """The running session for what `request` names: reused if there is one, started if not.

        Call it from the server's main thread: pdeathsig fires when the *thread* that started
        the child ends, so a short-lived worker thread would take TensorBoard down with it.
        A server passes `resolved` (what `resolve(request)` returned, in a worker thread) so
        the lookups in the run index stay off its event loop.
        """
        logdirs, source = resolved or self.resolve(request)
        sid = session_id(logdirs)
        with self._lock:
            session = self.sessions.get(sid)
            if session and session.alive:
                session.last_access = time.time()
                return session
            for other in list(self.sessions.values()):  # a sweep grew: its older set is replaced
                if other.source == source and other.id != sid and other.alive:
                    self._terminate(other, "replaced by a session with the sweep's newer trials")
            self._check_room()
            session = TensorBoardSession(sid, logdirs, source, f"{self.prefix_root}/{sid}", self.view_root)
            self.sessions[sid] = session
            self._spawn(session)
        self.on_change(session)
        return session

    def restart(self, sid: str) -> TensorBoardSession:
        """Start a known session again (a saved notebook's iframe after an idle stop)."""
        with self._lock:
            session = self.get(sid)
            if not session.alive:
                self._check_room()
                session.stopped_on_request = False
                session.state, session.reason = STARTING, "restarted on request"
                session.started_at = session.last_access = time.time()
                self._spawn(session)
        self.on_change(session)
        return session

    def _check_room(self) -> None:
        """Each session is a TensorBoard process of some hundreds of MB: at most `max_sessions`."""
        running = sum(1 for s in self.sessions.values() if s.alive)
        if running >= self.max_sessions:
            raise TooMany(
                f"{running} TensorBoard sessions are running, the most this server allows "
                "(stop one, or raise KUBELAB_MAX_TENSORBOARDS)"
            )

    def _spawn(self, session: TensorBoardSession) -> None:
        session.port = free_port()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        session.log_path = self.log_dir / f"{session.id}.log"
        command = [
            sys.executable,
            "-m",
            "kubelab.tensorboard.supervisor",
            "--parent",
            str(os.getpid()),
            *(["--pdeathsig"] if threading.current_thread() is threading.main_thread() else []),
            "--",
            "--logdir_spec",
            logdir_spec(session.logdirs),
            "--host",
            "127.0.0.1",
            "--port",
            str(session.port),
            "--reload_interval",
            "5",
        ]
        session.proxy_token = secrets.token_urlsafe(32) if self.guard else None
        with open(session.log_path, "ab") as log:
            session.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,  # the secrets: any account may read a command line
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends all of it
                close_fds=True,
            )
        assert session.process.stdin is not None
        with contextlib.suppress(BrokenPipeError), session.process.stdin as pipe:
            pipe.write(secrets_message(session.view_prefix, session.proxy_token))
        session.pid = session.process.pid
        session.state, session.reason = STARTING, "starting TensorBoard"

    # -- watching -------------------------------------------------------------------------
    def get(self, sid: str) -> TensorBoardSession:
        session = self.sessions.get(sid)
        if session is None:
            raise NotFound(
                f"no TensorBoard session '{sid}'", [FieldError("id", "is not a session of this server")]
            )
        return session

    def by_capability(self, capability: str) -> TensorBoardSession:
        """The session whose pages' URL holds `capability` (compared in constant time)."""
        for session in list(self.sessions.values()):
            if secrets.compare_digest(session.capability.encode(), capability.encode()):
                return session
        raise NotFound("no such TensorBoard page", [FieldError("url", "names no session of this server")])

    def list(self) -> list[TensorBoardSession]:
        for session in list(self.sessions.values()):
            self.check(session)
        return sorted(self.sessions.values(), key=lambda s: s.started_at)

    def check(self, session: TensorBoardSession) -> str:
        """Bring `state` up to date: listening → running, exited → failed."""
        if session.state in (STARTING, RUNNING) and not session.alive:
            code = session.process.returncode if session.process else None
            session.state, session.reason = FAILED, f"TensorBoard exited ({code}): {self.log_tail(session)}"
            self.on_change(session)
        elif session.state == STARTING and listening(session.port):
            session.state, session.reason = RUNNING, "serving"
            self.on_change(session)
        return session.state

    def log_tail(self, session: TensorBoardSession, lines: int = 3) -> str:
        try:
            text = session.log_path.read_text(errors="replace") if session.log_path else ""
        except OSError:
            return ""
        useful = [ln for ln in text.splitlines() if ln.strip() and "TensorFlow installation" not in ln]
        return " | ".join(useful[-lines:])

    def wait_ready(self, session: TensorBoardSession, timeout: float = 30.0) -> bool:
        """Block until the session serves (for the CLI; the server polls without blocking)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.check(session) != STARTING:
                return session.state == RUNNING
            time.sleep(0.05)
        return False

    def touch(self, sid: str) -> None:
        session = self.sessions.get(sid)
        if session:
            session.last_access = time.time()

    def reap_idle(self, now: float | None = None) -> builtins.list[TensorBoardSession]:
        """Stop sessions nobody has looked at for `idle_timeout` seconds."""
        now = time.time() if now is None else now
        idle = [
            s
            for s in self.sessions.values()  # a starting session is not idle: someone waits
            if s.alive and s.state == RUNNING and now - s.last_access > self.idle_timeout
        ]
        minutes = self.idle_timeout / 60
        for session in idle:
            self._terminate(session, f"idle for {minutes:g} minutes")
        for session in list(self.sessions.values()):
            self.check(session)
        return idle

    # -- stopping -------------------------------------------------------------------------
    def stop(self, sid: str) -> TensorBoardSession:
        session = self.get(sid)
        session.stopped_on_request = True
        self._terminate(session, "stopped on request")
        return session

    def _terminate(self, session: TensorBoardSession, reason: str) -> None:
        with self._lock:
            if session.process is not None:
                stop_group(session.process)
            session.state, session.reason = STOPPED, reason
        self.on_change(session)

    def stop_all(self) -> None:
        """End every TensorBoard: TERM to all groups at once, then KILL what lingers."""
        with self._lock:
            running = [(s, s.process) for s in self.sessions.values() if s.alive and s.process is not None]
            for _, process in running:
                _signal_group(process.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE
            for session, process in running:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(max(0.0, deadline - time.monotonic()))
                _signal_group(process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(1.0)
                session.state, session.reason = STOPPED, "the server stopped"


def listening(port: int | None) -> bool:
    if not port:
        return False
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def stop_group(process: subprocess.Popen[bytes], grace: float = STOP_GRACE) -> None:
    _signal_group(process.pid, signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        _signal_group(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(1.0)
    _signal_group(process.pid, signal.SIGKILL)  # anything it left in its group


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# -- the child: TensorBoard with a parent watchdog ---------------------------------------


def _die_with_parent(parent: int, pdeathsig: bool) -> None:
    if pdeathsig and sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    def watch() -> None:
        while True:
            if os.getppid() != parent:  # reparented: the server is gone
                os.killpg(0, signal.SIGKILL)
            time.sleep(0.5)

    if os.getppid() != parent:
        os.killpg(0, signal.SIGKILL)
    threading.Thread(target=watch, name="kubelab-parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """`python -m kubelab.tensorboard.supervisor --parent PID [--pdeathsig] -- <tensorboard flags>`."""
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--") if "--" in args else len(args)
    own, flags = args[:split], args[split + 1 :]
    parent = int(own[own.index("--parent") + 1]) if "--parent" in own else os.getppid()
    _die_with_parent(parent, "--pdeathsig" in own)
    path_prefix, token = read_secrets(sys.stdin.buffer)
    serve(flags, path_prefix, token)


if __name__ == "__main__":
    main()
