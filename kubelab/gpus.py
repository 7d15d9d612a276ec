"""This machine's GPUs: discovery through NVML and machine-wide allocation.

Several processes hand out GPUs on one machine (runners started by the CLI, by
Jupyter servers of different users, by the hub's local spawner), so allocation is a
small JSON ledger guarded by an exclusive `flock`, shared by all of them. A holder
that died is noticed by its pid and its GPUs come back. Waiting is first come, first
served: a later request never jumps an earlier one (no starvation of large requests).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


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
            import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            return []
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


def machine_dir() -> Path:
    """Shared by every user of this machine, like /tmp (sticky, world-writable)."""
    path = Path(os.environ.get("KUBELAB_MACHINE_DIR") or "/tmp/kubelab-machine")
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(PermissionError):
            path.chmod(0o1777)
    return path


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class GpuAllocator:
    """The machine-wide ledger of who holds which GPU and who waits."""

    def __init__(self, gpus: list[Gpu] | None = None, directory: Path | None = None):
        self.gpus = detect_gpus() if gpus is None else gpus
        self.directory = directory or machine_dir()
        self.ledger = self.directory / "gpus.json"
        self.lockfile = self.directory / "gpus.lock"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                state = json.loads(self.ledger.read_text())
            except (FileNotFoundError, json.JSONDecodeError):
                state = {"allocations": {}, "queue": []}
            before = json.dumps(state, sort_keys=True)
            self._reclaim(state)
            yield state
            if json.dumps(state, sort_keys=True) != before:
                tmp = self.ledger.with_name(f".gpus.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(state))
                with contextlib.suppress(PermissionError):
                    tmp.chmod(0o666)
                os.replace(tmp, self.ledger)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @staticmethod
    def _reclaim(state: dict[str, Any]) -> None:
        state["allocations"] = {
            gpu: holder for gpu, holder in state["allocations"].items() if pid_alive(holder["pid"])
        }
        state["queue"] = [entry for entry in state["queue"] if pid_alive(entry["pid"])]

    def try_acquire(self, run: str, pid: int, count: int, gpu_type: str | None = None,
                    submitted: float | None = None) -> list[int] | None:
        """GPU indices for `run` if its turn has come and enough are free; else queue it.

        Turns follow submission time (`submitted`), not the order runners happen to start in.
        """
        if count > len([g for g in self.gpus if g.matches(gpu_type)]):
            raise ValueError(self.impossible(count, gpu_type))
        with self._locked() as state:
            held = sorted(int(g) for g, h in state["allocations"].items() if h["run"] == run)
            if held:
                return held
            if not any(entry["run"] == run for entry in state["queue"]):
                since = time.time() if submitted is None else submitted
                entry = {"run": run, "pid": pid, "gpus": count, "gpu_type": gpu_type, "since": since}
                state["queue"].append(entry)
                state["queue"].sort(key=lambda entry: entry["since"])
            if state["queue"][0]["run"] != run:
                return None
            taken = state["allocations"]
            free = [g.index for g in self.gpus if g.matches(gpu_type) and str(g.index) not in taken]
            if len(free) < count:
                return None
            chosen = free[:count]
            for index in chosen:
                state["allocations"][str(index)] = {"run": run, "pid": pid, "since": time.time()}
            state["queue"].pop(0)
            return chosen

    def impossible(self, count: int, gpu_type: str | None) -> str:
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

    def snapshot(self) -> dict[str, Any]:
        """Totals, free counts per type, holders and the waiting queue."""
        with self._locked() as state:
            allocations = dict(state["allocations"])
            queue = list(state["queue"])
        types: dict[str, dict[str, int]] = {}
        for gpu in self.gpus:
            entry = types.setdefault(gpu.name, {"total": 0, "free": 0})
            entry["total"] += 1
            entry["free"] += str(gpu.index) not in allocations
        return {
            "total": len(self.gpus),
            "free": sum(t["free"] for t in types.values()),
            "types": [{"type": name, **counts} for name, counts in types.items()],
            "devices": [
                {**asdict(g), "holder": allocations.get(str(g.index), {}).get("run")} for g in self.gpus
            ],
            "queue": queue,
        }
