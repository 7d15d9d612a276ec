"""This machine's GPUs: discovery through NVML and machine-wide allocation.

Several processes hand out GPUs on one machine (runners started by the CLI, by
Jupyter servers of different users, by the hub's local spawner), so allocation is a
small JSON ledger guarded by an exclusive `flock`, shared by all of them. A holder
that died is noticed by its pid and its GPUs come back. Waiting is first come, first
served: a later request never jumps an earlier one (no starvation of large requests).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kubelab.backends.local import placement, preemption
from kubelab.errors import KubelabError
from kubelab.gpu_share import is_fraction
from kubelab.pids import pid_alive
from kubelab.priorities import NORMAL_PRIORITY


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str = ""
    memory_mib: int = 0

    def matches(self, gpu_type: str | None) -> bool:
        """`V100` matches `Tesla V100-SXM2-32GB`; no type matches every GPU."""
        return not gpu_type or gpu_type.lower() in self.name.lower()


def detect_gpus(nvml: Any = None) -> list[Gpu]:
    """GPUs visible through NVML; `KUBELAB_FAKE_GPUS` stands in for them in tests and demos.

    `KUBELAB_FAKE_GPUS` is a comma-separated list of names (`"T4,T4"`) or a count (`"2"`).
    """
    fake = os.environ.get("KUBELAB_FAKE_GPUS")
    if fake is not None:
        return parse_fake_gpus(fake)
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return []
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:  # no driver, no library, no device: a CPU machine
        return []
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle).total // 2**20
            gpus.append(Gpu(index, _text(name), _text(uuid), int(memory)))
        return gpus
    finally:
        nvml.nvmlShutdown()


def parse_fake_gpus(text: str) -> list[Gpu]:
    text = text.strip()
    if not text:
        return []
    if text.isdigit():
        return [Gpu(i, "Fake GPU", f"GPU-fake-{i}") for i in range(int(text))]
    return [Gpu(i, name.strip(), f"GPU-fake-{i}") for i, name in enumerate(text.split(","))]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


SHARED_MACHINE_DIR = Path("/var/lib/kubelab/machine")
OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC
LEDGER, LOCK = "gpus.json", "gpus.lock"


def machine_dir() -> Path:
    """Where this machine's ledger lives, checked before anything in it is trusted.

    `KUBELAB_MACHINE_DIR` when set; else `/var/lib/kubelab/machine` when this process may write
    there (root creates it; `kubelab hub` shares it with the lab's users through a group); else
    a per-user ledger in `~/.kubelab/machine`, which coordinates only this user's runs.
    """
    configured = os.environ.get("KUBELAB_MACHINE_DIR")
    if configured:
        return checked_dir(Path(configured))
    shared = SHARED_MACHINE_DIR
    if os.geteuid() == 0 or (shared.is_dir() and os.access(shared, os.W_OK | os.X_OK)):
        return checked_dir(shared)
    return checked_dir(Path.home() / ".kubelab" / "machine")


def checked_dir(path: Path) -> Path:
    """`path` created `0700` if missing; refused unless a real folder of root's or this user's
    that not every account may write to (anyone could otherwise rewrite the ledger or plant
    links for a root process to write through)."""
    if not os.path.lexists(path):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise KubelabError(f"the GPU ledger folder {path} is a symbolic link; kubelab will not use it")
    if not stat.S_ISDIR(info.st_mode):
        raise KubelabError(f"the GPU ledger folder {path} is not a folder")
    if info.st_uid not in (0, os.geteuid()):
        raise KubelabError(
            f"the GPU ledger folder {path} belongs to {account_name(info.st_uid)}, not to root or "
            "this user; kubelab will not use it (set KUBELAB_MACHINE_DIR to a folder of yours)"
        )
    if info.st_mode & stat.S_IWOTH:
        raise KubelabError(
            f"the GPU ledger folder {path} is writable by every user, so anyone could rewrite "
            f"the ledger; kubelab will not use it (`chmod o-w {path}`, or share it through a group)"
        )
    return path


ASK_ADMIN = "a root hub repairs the GPU ledger's files at its next spawn, or ask the admin"


def _owner(path: Path) -> str:
    try:
        info = path.lstat()
    except OSError:
        return "not readable"
    return f"{account_name(info.st_uid)}'s, mode {stat.S_IMODE(info.st_mode):o}"


def account_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class GpuAllocator:
    """The machine-wide ledger of who holds which GPU and who waits."""

    def __init__(self, gpus: list[Gpu] | None = None, directory: Path | None = None):
        self.gpus = detect_gpus() if gpus is None else gpus
        self.directory = directory or machine_dir()
        self.ledger = self.directory / LEDGER
        self.lockfile = self.directory / LOCK

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        fd = self._open(self.lockfile, os.O_RDWR, create=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state = self._read()
            before = json.dumps(state, sort_keys=True)
            self._reclaim(state)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                self._write(state)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _open(self, path: Path, flags: int, create: bool = False) -> int:
        """Never through a link another account planted (symbolic or hard); created `0600`, or
        `0660` in a group-shared folder, never `0666`."""
        mode = 0o660 if self._group_shared() else 0o600
        try:
            try:
                fd = os.open(path, flags | OPEN_FLAGS | (os.O_CREAT | os.O_EXCL if create else 0), mode)
                if create:
                    os.fchmod(fd, mode)  # the umask may have taken bits away
            except FileExistsError:
                fd = os.open(path, flags | OPEN_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise KubelabError(f"{path} is a symbolic link; kubelab will not use it") from None
            if exc.errno == errno.EACCES:
                closed = f"{path} is closed to this account ({_owner(path)}); {ASK_ADMIN}"
                raise KubelabError(closed) from None
            raise
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            raise KubelabError(f"{path} is not a plain file of its own; kubelab will not use it")
        return fd

    def _group_shared(self) -> bool:
        return bool(self.directory.stat().st_mode & stat.S_ISGID)

    def _read(self) -> dict[str, Any]:
        try:
            fd = self._open(self.ledger, os.O_RDONLY)
        except FileNotFoundError:
            return {"allocations": {}, "queue": []}
        with os.fdopen(fd) as handle:
            try:
                state = json.load(handle)
            except (json.JSONDecodeError, UnicodeDecodeError):
                state = None
        if not isinstance(state, dict):  # a torn or foreign file: start over rather than fail
            return {"allocations": {}, "queue": []}
        state.setdefault("allocations", {})
        state.setdefault("queue", [])
        return state

    def _write(self, state: dict[str, Any]) -> None:
        """A fresh temporary file (`mkstemp`: O_EXCL, no link followed), then an atomic rename;
        in a group's sticky folder, where root's ledger cannot be renamed over
        (`ledger_folder`), rewritten in place under the lock instead."""
        if self._group_shared():
            fd = self._open(self.ledger, os.O_WRONLY, create=True)
            with os.fdopen(fd, "w") as handle:
                handle.truncate(0)
                json.dump(state, handle)
            return
        fd, tmp = tempfile.mkstemp(prefix=".gpus.", suffix=".tmp", dir=self.directory)
        try:
            os.fchmod(fd, 0o660 if self._group_shared() else 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump(state, handle)
            os.replace(tmp, self.ledger)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    @staticmethod
    def _reclaim(state: dict[str, Any]) -> None:
        state["allocations"] = {
            gpu: holder for gpu, holder in state["allocations"].items() if pid_alive(holder["pid"])
        }
        state["queue"] = [entry for entry in state["queue"] if pid_alive(entry["pid"])]
        shares = {gpu: [h for h in holders if pid_alive(h["pid"])] for gpu, holders in _shares(state).items()}
        state["shares"] = {gpu: holders for gpu, holders in shares.items() if holders}
        preemption.reclaim(state)

    def try_acquire(
        self,
        run: str,
        pid: int,
        count: float,
        gpu_type: str | None = None,
        submitted: float | None = None,
        priority: int = NORMAL_PRIORITY,
        preemptible: bool = False,
        fewer: tuple[float, ...] = (),
        elastic: tuple[int, int] | None = None,
    ) -> list[int] | None:
        """GPU indices for `run` if its turn has come and enough are free; else queue it.

        Turns follow priority, then submission time (`submitted`), not the order runners
        happen to start in. A `count` under 1 is a share of one GPU (1/n, kubelab/gpu_share.py).
        The head of the queue that does not fit marks preemptible runs of lower priority to
        make room (kubelab/backends/local/preemption.py); it gets their GPUs once they let go.
        `fewer` (an elastic run's smaller sizes, largest first) are taken when `count` does not
        fit; only the smallest makes room by preemption. `elastic` (GPUs per replica, `min`
        replicas) records each GPU's replica, so a preemption may take only the spare ones.
        """
        least = min((count, *fewer))
        if least > len([g for g in self.gpus if g.matches(gpu_type)]):
            raise ValueError(self.impossible(least, gpu_type))
        with self._locked() as state:
            held = sorted({int(gpu) for gpu, _ in preemption.holders(state).get(run, [])})
            if held:
                return held
            if not any(entry["run"] == run for entry in state["queue"]):
                since = time.time() if submitted is None else submitted
                entry = {"run": run, "pid": pid, "gpus": count, "gpu_type": gpu_type, "since": since}
                state["queue"].append({**entry, "priority": priority})
                state["queue"].sort(
                    key=lambda entry: (-entry.get("priority", NORMAL_PRIORITY), entry["since"])
                )
            if state["queue"][0]["run"] != run:
                return None
            placed = placement.place(state, self.gpus, (count, *fewer), gpu_type, priority, run)
            chosen = placed.chosen
            if not chosen:
                preemption.mark(state, placed.takes, run, priority, time.time())
                return None
            holder = {
                "run": run,
                "pid": pid,
                "since": time.time(),
                "priority": priority,
                "preemptible": preemptible,
            }
            if is_fraction(count):
                state.setdefault("shares", {}).setdefault(str(chosen[0]), []).append(
                    {**holder, "share": count}
                )
            else:
                for position, index in enumerate(chosen):
                    state["allocations"][str(index)] = (
                        {**holder, "replica": position // elastic[0], "min_replicas": elastic[1]}
                        if elastic
                        else holder
                    )
            state["queue"].pop(0)
            return chosen

    def give_up(self, run: str, gpus: list[str]) -> None:
        """An elastic run retired the replicas on `gpus`: they are free, and its mark is served."""
        with self._locked() as state:
            for gpu in gpus:
                if state["allocations"].get(gpu, {}).get("run") == run:
                    del state["allocations"][gpu]
            preemption.forget(state, run)

    def grow(self, run: str, replicas: list[int], per: int, gpu_type: str | None) -> dict[int, list[int]]:
        """Free GPUs for more of an elastic run's replicas (index -> its GPUs), only while nobody
        waits in the queue (a waiting run comes first) and the run holds no preemption mark."""
        with self._locked() as state:
            mine = [h for h in state["allocations"].values() if h["run"] == run]
            if state["queue"] or not mine or run in (state.get("preemptions") or {}):
                return {}
            grown: dict[int, list[int]] = {}
            for replica in replicas:
                chosen = placement.fit(state, self.gpus, per, gpu_type)
                if not chosen:
                    break
                for index in chosen:
                    state["allocations"][str(index)] = {**mine[0], "replica": replica}
                grown[replica] = chosen
            return grown

    def preview(
        self, count: float, priority: int, gpu_type: str | None = None, fewer: tuple[float, ...] = ()
    ) -> dict[str, Any]:
        """What a new run would get or take now: `placement.preview` on the ledger's state."""
        least = min((count, *fewer))
        if least > len([g for g in self.gpus if g.matches(gpu_type)]):
            raise ValueError(self.impossible(least, gpu_type))
        with self._locked() as state:
            return placement.preview(state, self.gpus, (count, *fewer), gpu_type, priority)

    def preemption(self, run: str) -> dict[str, Any] | None:
        """The mark asking `run` to give its GPUs up (who for, at what priority), or None."""
        with self._locked() as state:
            mark = (state.get("preemptions") or {}).get(run)
        return dict(mark) if isinstance(mark, dict) else None

    def impossible(self, count: float, gpu_type: str | None) -> str:
        kind = f" of type {gpu_type}" if gpu_type else ""
        have = len([g for g in self.gpus if g.matches(gpu_type)])
        return f"asked for {count} GPU(s){kind} but this machine has {have}"

    def position(self, run: str) -> int | None:
        """0 for the head of the queue, None when not waiting."""
        with self._locked() as state:
            for position, entry in enumerate(state["queue"]):
                if entry["run"] == run:
                    return position
        return None

    def release(self, run: str) -> None:
        with self._locked() as state:
            state["allocations"] = {g: h for g, h in state["allocations"].items() if h["run"] != run}
            state["queue"] = [entry for entry in state["queue"] if entry["run"] != run]
            shares = {g: [h for h in holders if h["run"] != run] for g, holders in _shares(state).items()}
            state["shares"] = {g: holders for g, holders in shares.items() if holders}
            preemption.forget(state, run)

    def holdings(self) -> dict[str, tuple[int, list[int]]]:
        """run -> (the pid holding its GPUs, their indices): who to ask NVML about."""
        with self._locked() as state:
            held = preemption.holders(state)
        return {
            run: (int(entries[0][1]["pid"]), sorted({int(gpu) for gpu, _ in entries}))
            for run, entries in held.items()
        }

    def snapshot(self) -> dict[str, Any]:
        """Totals, free counts per type, holders and the waiting queue."""
        with self._locked() as state:
            allocations = dict(state["allocations"])
            shares = _shares(state)
            queue = list(state["queue"])
        types: dict[str, dict[str, int]] = {}
        for gpu in self.gpus:
            entry = types.setdefault(gpu.name, {"total": 0, "free": 0})
            entry["total"] += 1
            entry["free"] += str(gpu.index) not in allocations and str(gpu.index) not in shares
        return {
            "total": len(self.gpus),
            "free": sum(t["free"] for t in types.values()),
            "types": [{"type": name, **counts} for name, counts in types.items()],
            "devices": [
                {
                    **asdict(g),
                    "holder": allocations.get(str(g.index), {}).get("run"),
                    "shares": [{"run": h["run"], "share": h["share"]} for h in shares.get(str(g.index), [])],
                }
                for g in self.gpus
            ],
            "queue": queue,
        }


def _shares(state: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """GPU index -> the runs sharing it (a ledger from before sharing has none)."""
    shares = state.get("shares")
    return shares if isinstance(shares, dict) else {}


def _turn(entry: dict[str, Any]) -> tuple[int, float]:
    """Queue order: higher priority first, then earlier submission."""
    return (-int(entry.get("priority", NORMAL_PRIORITY)), float(entry["since"]))
