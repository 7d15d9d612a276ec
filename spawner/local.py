"""`LocalKubeLabSpawner`: the same form, profiles and groups on one GPU machine.

Each user gets `<root>/workspaces/<user>` (where the notebook starts, with `KUBELAB_HOME`
inside) and `<root>/archives/<user>`. GPUs come from the machine-wide ledger the local backend
uses, through `kubelab.spawner.gpu_exec`, so a notebook holding GPUs is a holder like any
experiment and its GPUs come back when it stops. Run as root, servers run as their own system
users (JupyterHub's LocalProcessSpawner); otherwise all run as the hub's user
(SimpleLocalProcessSpawner), which keeps nobody apart: fine for one person's workstation.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, cast

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner
from kubespawner.slugs import safe_slug
from traitlets import Bool, Dict, Unicode, default

from kubelab.backends.local.gpus import Gpu, GpuAllocator, detect_gpus
from kubelab.errors import KubelabError
from kubelab.priorities import CAP_ENV

from . import interfaces, local_usage_metrics
from .accounts import hub_account
from .admission import admit
from .availability import Availability, group_label, local_availability, notebook_run
from .choice import choose, hub_memberships, public_properties
from .form import admin_error, render_form
from .groups import ProjectGroup, user_groups
from .launch_checks import (
    check_port_free,
    check_runnable_by,
    exit_reason,
    folder_failure,
    launch_failure,
    until_listening,
)
from .profiles import Catalog, NotebookOptions
from .reserved_port import LISTEN_FD, reserve
from .server_log import crash_cause, log_name, read_tail, redirect_stderr
from .spawn_form import SpawnForm, refusal
from .user_dirs import make_owned_dirs

EXTENSION = "kubelab.server_extension"


def as_user_with_group(name: str, extra_gid: int, cwd: Path) -> Any:
    """JupyterHub's preexec for running as `name`, plus one supplementary group (the ledger's)."""
    import pwd

    entry = pwd.getpwnam(name)
    groups = sorted({*os.getgrouplist(name, entry.pw_gid), extra_gid})

    def preexec() -> None:
        os.setgid(entry.pw_gid)
        os.setgroups(groups)
        os.setuid(entry.pw_uid)
        with contextlib.suppress(OSError):
            os.chdir(cwd)

    return preexec


class LocalKubeLabSpawner(SpawnForm, SimpleLocalProcessSpawner):  # type: ignore[misc]  # untyped base
    """Single-user servers as local processes, with kubelab's GPU profiles and groups."""

    gpu_catalog = Dict(config=True, help="GPU types, images and profiles; images are ignored locally.")
    public_group_properties = Dict(config=True, help="Properties of `public` when the hub has no such group.")
    root = Unicode(config=True, help="Holds workspaces/<user> and archives/<user>.")
    run_as_users = Bool(config=True, help="Run each server as the system user of its name (needs root).")
    create_system_users = Bool(
        False,
        config=True,
        help=(
            "Create a missing system account at the first spawn (for authenticators without system "
            "accounts, such as NativeAuthenticator with admin approval); needs root. A hub name then "
            "runs only as an account this hub created (recorded in <root>/system-accounts.json), "
            "never as an existing one."
        ),
    )
    ledger_group = Unicode(
        "kubelab",
        config=True,
        help=(
            "As root: the group whose members share this machine's GPU ledger; created if missing, "
            "and given to every server it starts, so all users' notebooks and runs share one ledger."
        ),
    )
    only_own_user = Bool(config=True, help="Start servers only for the hub's account (default without root).")
    code_server = Unicode(
        "code-server", config=True, help="code-server for the form's VS Code: a path or a name on PATH."
    )
    cmd: list[str]  # Spawner's trait (an untyped base), which start() wraps in the GPU launcher
    port: int  # Spawner's trait: 0 until a port is chosen
    popen_kwargs: dict[str, Any]  # LocalProcessSpawner's trait, given to Popen

    @default("only_own_user")
    def _default_only_own_user(self) -> bool:
        return os.geteuid() != 0

    @default("root")
    def _default_root(self) -> str:
        return os.environ.get("KUBELAB_HUB_ROOT") or str(Path.home() / "kubelab-hub")

    @default("run_as_users")
    def _default_run_as_users(self) -> bool:
        return os.geteuid() == 0

    @default("home_dir")
    def _default_home_dir(self) -> str:
        return str(self.workspace)

    @property
    def catalog(self) -> Catalog:
        return Catalog.parse(self.gpu_catalog, "LocalKubeLabSpawner.gpu_catalog")

    @property
    def user_slug(self) -> str:
        return cast(str, safe_slug(self.user.name, max_length=48))

    @property
    def workspace(self) -> Path:
        return Path(self.root) / "workspaces" / self.user_slug

    @property
    def archive(self) -> Path:
        return Path(self.root) / "archives" / self.user_slug

    _gpus: ClassVar[list[Gpu] | None] = None

    def allocator(self) -> GpuAllocator:
        """The machine ledger; GPUs are discovered once per hub (NVML is slow to open per page view)."""
        if LocalKubeLabSpawner._gpus is None:
            LocalKubeLabSpawner._gpus = detect_gpus()
        if self.run_as_users and os.geteuid() == 0:  # shared (and repaired) before any file is made
            self.shared_ledger()
        return GpuAllocator(list(LocalKubeLabSpawner._gpus))

    def availability(self) -> Availability:
        return local_availability(self.allocator().snapshot(), self.catalog)

    def _choose(self, raw: Any) -> tuple[NotebookOptions, ProjectGroup]:
        options, group = choose(
            raw,
            self.catalog,
            hub_memberships(self.user),
            public_properties(self, self.public_group_properties),
            local=True,
        )
        admit(options, group, self.user_slug, self.availability())
        return options, group

    async def _render_form(self, spawner: Any = None) -> str:
        try:
            groups = user_groups(
                hub_memberships(self.user), public_properties(self, self.public_group_properties)
            )
        except KubelabError as exc:
            return admin_error(exc)
        return render_form(self.catalog, groups, self.availability(), self.user_options)

    async def _admit(self, raw: dict[str, Any]) -> NotebookOptions:
        return self._choose(raw)[0]  # choosing admits, against this machine's GPUs

    # -- processes ------------------------------------------------------------------------

    def make_preexec_fn(self, name: str) -> Any:
        if self.run_as_users:
            become = as_user_with_group(name, self.shared_ledger(), self.workspace)
        else:
            become = super().make_preexec_fn(name)
        return redirect_stderr(self.server_log, become)  # opened as the user, after `become`

    @property
    def server_log(self) -> Path:
        """Where this server's stderr goes (see `kubelab.spawner.server_log`), in its `.kubelab`."""
        return self.workspace / ".kubelab" / log_name(self.name)

    def exit_failure(self, status: int, since: float) -> KubelabError:
        """The sentence for a server that exited with `status` before it listened, quoting the
        line of its log that says why: read without following links, only if the server's
        account owns it and it was written since this start."""
        import pwd

        owner = pwd.getpwnam(self.user.name).pw_uid if self.run_as_users else os.geteuid()
        parts = self.server_log.relative_to(self.root).parts
        cause = crash_cause(read_tail(Path(self.root), parts, owner, since), [self.api_token or ""])
        return exit_reason(self.user.name, status, cause, self.server_log)

    def shared_ledger(self) -> int:
        """The ledger's group id, after making the ledger folder that group's (root only)."""
        import grp
        import subprocess

        from kubelab.backends.local.gpus import machine_dir
        from kubelab.backends.local.ledger_folder import share_with_group

        try:
            gid = grp.getgrnam(self.ledger_group).gr_gid
        except KeyError:
            subprocess.run(["groupadd", "--system", "--", self.ledger_group], check=True, capture_output=True)
            gid = grp.getgrnam(self.ledger_group).gr_gid
        for repaired in share_with_group(machine_dir(), gid):
            self.log.warning("GPU ledger: %s", repaired)
        return gid

    def user_env(self, env: dict[str, str]) -> dict[str, str]:
        env = LocalProcessSpawner.user_env(self, env) if self.run_as_users else super().user_env(env)
        env["HOME"] = str(self.workspace)
        return env

    def move_certs(self, paths: dict[str, str]) -> Any:
        if self.run_as_users:
            return LocalProcessSpawner.move_certs(self, paths)
        return paths

    def prepare_folders(self) -> None:
        """The user's workspace, its `.kubelab` and the archive: the user's own, `0700`.

        As root, through `make_owned_dirs`: the user owns the workspace and may have replaced
        anything in it with a symlink, which a root `mkdir`/`chown` by name would follow.
        """
        slug = self.user_slug
        if not self.run_as_users:
            for path in (self.workspace, self.workspace / ".kubelab", self.archive):
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
            return
        import pwd

        try:
            if self.create_system_users:  # only an account this hub made: `kubelab.spawner.accounts`
                entry = hub_account(self.user.name, Path(self.root))
            else:
                entry = pwd.getpwnam(self.user.name)
        except KeyError:
            raise KubelabError(
                f"there is no system account named '{self.user.name}' on this machine, and the "
                "hub runs each notebook as its user's account (create it, e.g. `useradd "
                f"{self.user.name}`, or use an authenticator that creates accounts)"
            ) from None
        root, owner = Path(self.root), (entry.pw_uid, entry.pw_gid)
        for parts in (["workspaces", slug, ".kubelab"], ["archives", slug]):
            try:
                make_owned_dirs(root, parts, 1, *owner)
            except OSError as exc:
                raise folder_failure(root.joinpath(*parts[:2]), exc) from None

    def check_launch(self) -> None:
        """The user's account can run the Python and packages the server starts from, and a
        configured port is free: otherwise the server would die before it could say why."""
        import shutil

        check_port_free(self.ip, self.port)
        program = shutil.which(self.cmd[0]) if self.cmd else None
        if self.cmd and program is None:
            raise KubelabError(
                f"the notebook server's command {self.cmd[0]!r} is not an executable "
                "program on this machine (ask the admin to check LocalKubeLabSpawner.cmd)"
            )
        if not self.run_as_users:
            return
        import pwd

        from .preflight import interpreter_paths

        paths = interpreter_paths()
        if program:
            paths.append(Path(program))
        check_runnable_by(pwd.getpwnam(self.user.name), paths)

    @property
    def gpu_run(self) -> str:
        return notebook_run(self.user_slug, group_label(self._group.name), self.name or "default")

    def check_user(self) -> None:
        """Without root every server runs as the hub's account: only that account may have one."""
        import getpass

        me = getpass.getuser()
        if self.only_own_user and self.user.name != me:
            raise KubelabError(
                f"this hub runs as {me} without root, so it starts a server only for {me}; "
                f"ask the admin to run it as root for '{self.user.name}' to have one"
            )

    async def start(self) -> Any:
        try:
            self.check_user()
            options, group = self._choose(self.user_options or {})
        except KubelabError as exc:
            raise refusal(exc) from None
        self._group, self._options = group, options
        if self.port and self.port == self._reserved_port:
            self.port = 0  # the last server's root-only port: reserve one afresh
        try:
            self.prepare_folders()
            self.check_launch()
            listener = self.reserve_port()
        except KubelabError as exc:
            raise refusal(exc) from None
        self.notebook_dir = str(self.workspace)
        self.default_url = interfaces.URLS[options.interface]
        launcher = [
            sys.executable,
            "-m",
            "kubelab.spawner.gpu_exec",
            "--run",
            self.gpu_run,
            "--gpus",
            str(options.gpus),
        ]
        if options.gpu_type:  # the type's name matches device names, as `local_availability` does
            launcher += ["--type", options.gpu_type]
        configured = list(self.cmd)
        self.cmd = [*launcher, "--", *configured]
        since = time.time() - 1  # file times may lag the clock by a tick
        popen = dict(self.popen_kwargs)
        if listener is not None:  # the server inherits its socket (`kubelab.spawner.reserved_port`)
            self._listen_fd = listener.fileno()
            self.popen_kwargs = {**popen, "pass_fds": (self._listen_fd,)}
        try:
            address = await super().start()
        except OSError as exc:  # the process could not even be created
            raise refusal(launch_failure(self.user.name, exc)) from None
        finally:
            self.cmd, self.popen_kwargs, self._listen_fd = configured, popen, None
            if listener is not None:
                listener.close()  # the server holds it now
        status = await until_listening(self.proc, address, self.start_timeout)
        if status is not None:
            raise refusal(self.exit_failure(status, since)) from None
        local_usage_metrics.register(self.allocator())  # the hub's usage series, from its first server
        local_usage_metrics.running[(self.user.name, self.name)] = local_usage_metrics.LocalServer(
            self.pid, self.gpu_run, group_label(self._group.name)
        )
        return address

    _reserved_port = 0
    _listen_fd: int | None = None

    def reserve_port(self) -> socket.socket | None:
        """As root, with no port configured: a root-only port bound for the server, so that once
        it is gone no other account can take the port and the requests still routed there."""
        if not self.run_as_users or os.geteuid() != 0 or self.port:
            return None
        listener = reserve(self.ip or "127.0.0.1")
        if listener is None:
            self.log.warning(
                "every account may bind ports below 1024 on this machine (net.ipv4."
                "ip_unprivileged_port_start): another account can take a stopped server's port"
            )
            return None
        self.port = self._reserved_port = listener.getsockname()[1]
        return listener

    def get_args(self) -> list[str]:
        args = [
            *super().get_args(),
            f"--ServerApp.jpserver_extensions={EXTENSION}=True",
            f"--ServerApp.root_dir={self.workspace}",
        ]
        if not self.run_as_users and os.geteuid() == 0:  # servers run as the hub's root user
            args.append("--ServerApp.allow_root=True")
        return args

    def get_env(self) -> dict[str, str]:
        env: dict[str, str] = super().get_env()
        group = getattr(self, "_group", None)
        env.update(
            {
                "KUBELAB_HOME": str(self.workspace / ".kubelab"),
                "KUBELAB_BACKEND": "local",
                "KUBELAB_USER": self.user.name,
                "KUBELAB_WORKSPACE": str(self.workspace),
                "KUBELAB_ARCHIVE": str(self.archive),
            }
        )
        if group is not None:
            env["KUBELAB_PROJECT"] = group.name
            if group.max_priority is not None:  # the backend refuses runs above it
                env[CAP_ENV] = group.max_priority
        options = getattr(self, "_options", None)
        env.update(interfaces.vscode_env(options.interface if options else "lab", str(self.workspace)))
        code_server = shutil.which(self.code_server) or ""  # kubelab and code-server on terminals' PATH
        tools = [interfaces.kubelab_bin(), os.path.dirname(code_server)]
        env["PATH"] = interfaces.path_with(tools, env.get("PATH", os.environ.get("PATH", "")))
        if self._listen_fd is not None:
            env[LISTEN_FD] = str(self._listen_fd)
        for name in ("KUBELAB_MACHINE_DIR", "KUBELAB_FAKE_GPUS"):  # the ledger the local backend shares
            if os.environ.get(name) is not None:
                env[name] = os.environ[name]
        return env

    async def stop(self, now: bool = False) -> None:
        leader = self.pid  # the server leads its own process group (LocalProcessSpawner's session)
        local_usage_metrics.running.pop((self.user.name, self.name), None)
        await super().stop(now)
        if leader and leader > 1:
            # what the server started and left behind (code-server's extension hosts, a proxied
            # app's children) would outlive it; runs, TensorBoards and services have their own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(leader, signal.SIGTERM)
        if getattr(self, "_group", None) is not None:
            self.allocator().release(self.gpu_run)
