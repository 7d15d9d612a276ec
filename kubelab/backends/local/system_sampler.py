"""The local runner's sampler: the run's GPUs through NVML, its processes through psutil.

Two narrow readers stand between the sampler and the hardware so tests can feed recorded
answers (`GpuReader`, `ProcessReader`); `open_gpu_reader` decides once whether GPU metrics
exist at all (no NVML library, no driver, or `KUBELAB_FAKE_GPUS` standing in for GPUs: then
the run's `system.jsonl` says why in its first line and holds no GPU numbers). A thread
appends one line per interval and, about once a minute and at the end, saves the file's digest
(kubelab/system_digest.py) so no view decodes the day again; it never raises into the run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from kubelab import system_digest
from kubelab.system_metrics import GpuReading, Sample, append, interval_from_env, sources_line


class GpuReader(Protocol):
    name: str

    def read(self, indices: list[int]) -> list[GpuReading]: ...

    def system(self) -> dict[str, Any]:
        """The driver's and CUDA's versions and each GPU's name (a run's environment.json)."""
        ...

    def close(self) -> None: ...


class ProcessReader(Protocol):
    def read(self) -> tuple[float | None, float | None]:
        """(CPU percent of one core summed over the run's processes, resident MiB)."""
        ...


class NvmlReader:
    """NVML through NVIDIA's binding (`nvidia-ml-py`'s `pynvml`, or a recorded stand-in)."""

    name = "nvml"

    def __init__(self, nvml: Any):
        self.nvml = nvml
        nvml.nvmlInit()
        self.handles: dict[int, Any] = {}

    def read(self, indices: list[int]) -> list[GpuReading]:
        return [self._read_one(index) for index in indices]

    def _read_one(self, index: int) -> GpuReading:
        nvml = self.nvml
        handle = self.handles.get(index)
        if handle is None:
            handle = self.handles[index] = nvml.nvmlDeviceGetHandleByIndex(index)
        util = self._ask(lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        memory = self._ask(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20)
        power = self._ask(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000)  # milliwatts
        temperature = self._ask(
            lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
        )
        return GpuReading(index, util, memory, power, temperature)

    def system(self) -> dict[str, Any]:
        nvml = self.nvml
        cuda = self._ask(lambda: float(nvml.nvmlSystemGetCudaDriverVersion()))  # 12020 for 12.2
        names = []
        for index in range(nvml.nvmlDeviceGetCount()):
            name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(index))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        driver = nvml.nvmlSystemGetDriverVersion()
        return {
            "driver": driver.decode() if isinstance(driver, bytes) else str(driver),
            "cuda": None if cuda is None else f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}",
            "gpus": names,
        }

    def _ask(self, query: Callable[[], float]) -> float | None:
        """One field; a field this GPU does not support (power on some boards) is left out."""
        try:
            return query()
        except self.nvml.NVMLError:
            return None

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()


def open_gpu_reader(nvml: Any = None) -> tuple[GpuReader | None, str]:
    """A reader for this machine's GPUs, or None and the sentence that says why not."""
    if os.environ.get("KUBELAB_FAKE_GPUS") is not None:
        return None, "the GPUs are simulated (KUBELAB_FAKE_GPUS): no GPU metrics"
    if nvml is None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return None, "NVML's Python binding (nvidia-ml-py) is not installed"
        nvml = pynvml
    try:
        return NvmlReader(nvml), ""
    except nvml.NVMLError as exc:
        return None, f"NVML is not available on this machine ({exc})"


class PsutilReader:
    """CPU and memory of every process under the runner (it is their subreaper)."""

    def __init__(self, root: int | None = None):
        import psutil

        self.psutil = psutil
        self.root = psutil.Process(root or os.getpid())
        self.known: dict[int, Any] = {}

    def read(self) -> tuple[float | None, float | None]:
        psutil = self.psutil
        try:
            children = self.root.children(recursive=True)
        except psutil.Error:
            return None, None
        cpu = 0.0
        rss = 0.0
        alive: dict[int, Any] = {}
        for child in children:
            process = self.known.get(child.pid, child)
            try:
                # cpu_percent compares with this object's previous call: keep the same object.
                cpu += process.cpu_percent(None)
                rss += process.memory_info().rss
            except psutil.Error:
                continue
            alive[child.pid] = process
        self.known = alive
        if not alive:
            return None, None
        return cpu, rss / 2**20


DIGEST_EVERY = 60.0
"""Seconds between the sampler's saves of the digest (readers fold what came after)."""


class SystemSampler:
    """Appends a sample of the run's GPUs and processes to `path` every `interval` seconds.

    A context manager around the run's execution: entering writes the sources line, leaving
    stops the thread. An interval of 0 turns sampling off (nothing is written).
    """

    def __init__(
        self,
        path: Path,
        gpu_ids: list[int],
        interval: float,
        gpu_reader: GpuReader | None = None,
        gpu_missing: str = "",
        process_reader: ProcessReader | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.path = path
        self.gpu_ids = gpu_ids
        self.interval = interval
        self.gpu_reader = gpu_reader
        self.gpu_missing = gpu_missing
        self.process_reader = process_reader
        self.clock = clock
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="kubelab-system-sampler", daemon=True)

    @classmethod
    def for_run(cls, path: Path, gpu_ids: list[int], interval: float | None = None) -> SystemSampler:
        """The sampler a local run gets: NVML when the run holds GPUs, psutil always."""
        reader: GpuReader | None = None
        missing = ""
        if gpu_ids:
            reader, missing = open_gpu_reader()
        return cls(
            path,
            gpu_ids,
            interval_from_env() if interval is None else interval,
            reader,
            missing,
            PsutilReader(),
        )

    def sample(self) -> Sample:
        gpus: tuple[GpuReading, ...] = ()
        if self.gpu_reader is not None and self.gpu_ids:
            try:
                gpus = tuple(self.gpu_reader.read(self.gpu_ids))
            except Exception:  # a driver that stops answering must not end the run
                gpus = ()
        cpu, rss = self.process_reader.read() if self.process_reader else (None, None)
        return Sample(self.clock(), gpus, cpu, rss)

    def __enter__(self) -> SystemSampler:
        if self.interval <= 0:
            return self
        sources: dict[str, str] = {}
        missing: dict[str, str] = {}
        if self.gpu_ids:
            if self.gpu_reader is not None:
                sources["gpu"] = self.gpu_reader.name
            else:
                missing["gpu"] = self.gpu_missing or "no GPU reader"
        if self.process_reader is not None:
            sources["process"] = "psutil"
        append(self.path, sources_line(sources, missing))
        self.thread.start()
        return self

    def _loop(self) -> None:
        digested = time.monotonic()
        while not self.stopped.wait(self.interval):
            sample = self.sample()
            if sample.gpus or sample.cpu_percent is not None or sample.rss_mib is not None:
                try:
                    append(self.path, sample.as_json())
                except OSError:
                    return  # the run folder went away (deleted while running)
            if time.monotonic() - digested >= DIGEST_EVERY:
                self.digest()
                digested = time.monotonic()

    def digest(self) -> None:
        """Save the digest of what was sampled so far (only the lines since the last save are read)."""
        with contextlib.suppress(OSError):  # the run folder went away
            system_digest.read(self.path, save_after=1)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stopped.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
            self.digest()
        if self.gpu_reader is not None:
            self.gpu_reader.close()
