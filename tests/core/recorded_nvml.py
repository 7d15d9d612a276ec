"""A stand-in for `pynvml` that answers from a recorded file (tests/core/fixtures/nvml_*.json).

Only NVML's surface that kubelab calls is here, with the binding's own shapes: objects with
`.gpu`/`.used`/`.total`, milliwatts, `NVMLError` subclasses for unsupported fields. Each call
of a per-device query returns the file's next answer; the last one repeats.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
NVML_TEMPERATURE_GPU = 0


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_NotFound(NVMLError):
    pass


class RecordedNvml:
    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU

    NVMLError_NotFound = NVMLError_NotFound

    def __init__(
        self,
        name: str = "nvml_two_gpus.json",
        missing_library: bool = False,
        pids: dict[str, int] | None = None,
    ) -> None:
        recorded = json.loads((FIXTURES / name).read_text())
        self.devices: list[dict[str, Any]] = recorded["devices"]
        self.system: dict[str, Any] = recorded.get("system", {})
        self.pids = pids or {}  # a recorded process's name -> the pid it has in this test
        self.calls: dict[tuple[int, str], int] = {}
        self.missing_library = missing_library
        self.initialised = 0

    def _next(self, handle: int, field: str) -> Any:
        answers = self.devices[handle][field]
        if answers == "NotSupported":
            raise NVMLError_NotSupported("Not Supported")
        count = self.calls.get((handle, field), 0)
        self.calls[(handle, field)] = count + 1
        return answers[min(count, len(answers) - 1)]

    def nvmlInit(self) -> None:
        if self.missing_library:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return str(self.system["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self.system["cuda_driver_version"])

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.devices):
            raise NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return str(self.devices[handle]["name"])

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return str(self.devices[handle]["uuid"])

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        total = self.devices[handle]["memory_total"]
        used = self._next(handle, "memory_used")
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._next(handle, "utilization"), memory=0)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self._next(handle, "power_mw"))

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == NVML_TEMPERATURE_GPU
        return int(self._next(handle, "temperature_c"))

    def nvmlDeviceGetProcessUtilization(self, handle: int, last_seen: int) -> list[SimpleNamespace]:
        """The samples newer than `last_seen` (µs), one recorded round per call; NVML answers
        NotFound when no process ran a kernel since then."""
        answer = self._next(handle, "process_utilization")
        samples = [
            SimpleNamespace(**{**sample, "pid": self.pids.get(sample["pid"], -1)})
            for sample in answer
            if sample["timeStamp"] > last_seen
        ]
        if not samples:
            raise NVMLError_NotFound("Not Found")
        return samples
