"""GPU discovery at the NVML boundary, and the machine-wide ledger."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kubelab.backends.local.gpus import Gpu, GpuAllocator, detect_gpus, parse_fake_gpus


class FakeNvml:
    """A device list behind NVML's own function names: the real adapter code runs on it."""

    class NVMLError(Exception):
        pass

    def __init__(self, devices: list[dict[str, Any]] | None = None, fail_init: bool = False) -> None:
        self.devices = devices or []
        self.fail_init = fail_init
        self.shutdown = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shutdown = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return self.devices[index]

    def nvmlDeviceGetName(self, handle: dict[str, Any]) -> bytes:
        return str(handle["name"]).encode()  # older bindings return bytes

    def nvmlDeviceGetUUID(self, handle: dict[str, Any]) -> str:
        return str(handle["uuid"])

    def nvmlDeviceGetMemoryInfo(self, handle: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(total=handle["mib"] * 2**20)


def test_nvml_devices_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBELAB_FAKE_GPUS", raising=False)
    nvml = FakeNvml(
        [
            {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a", "mib": 81920},
            {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-b", "mib": 81920},
        ]
    )
    gpus = detect_gpus(nvml)
    assert gpus == [
        Gpu(0, "NVIDIA A100-SXM4-80GB", "GPU-a", 81920),
        Gpu(1, "NVIDIA A100-SXM4-80GB", "GPU-b", 81920),
    ]
    assert nvml.shutdown and gpus[0].matches("a100") and not gpus[0].matches("V100")


def test_a_machine_without_nvml_has_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBELAB_FAKE_GPUS", raising=False)
    assert detect_gpus(FakeNvml(fail_init=True)) == []
    assert detect_gpus() == []  # this machine: the real library, no driver


def test_fake_device_lists() -> None:
    assert [g.name for g in parse_fake_gpus("T4, V100")] == ["T4", "V100"]
    assert len(parse_fake_gpus("3")) == 3 and parse_fake_gpus("") == []


def test_ledger_is_first_come_first_served_and_reclaims_the_dead(tmp_path: Path) -> None:
    ledger = GpuAllocator([Gpu(0, "T4"), Gpu(1, "T4"), Gpu(2, "V100")], tmp_path)
    me = os.getpid()
    assert ledger.try_acquire("a", me, 2, "T4") == [0, 1]
    assert ledger.try_acquire("b", me, 1, "T4") is None  # queued
    assert ledger.try_acquire("c", me, 1, "V100") is None  # behind b, although a V100 is free
    assert ledger.position("c") == 1
    with pytest.raises(ValueError, match="asked for 2 GPU\\(s\\) of type V100 but this machine has 1"):
        ledger.try_acquire("d", me, 2, "V100")
    ledger.release("a")
    assert ledger.try_acquire("b", me, 1, "T4") == [0]
    assert ledger.try_acquire("c", me, 1, "V100") == [2]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert ledger.try_acquire("e", dead.pid, 1) == [1]
    snapshot = ledger.snapshot()  # e's holder is dead: its GPU comes back
    assert snapshot["free"] == 1 and {t["type"]: t["free"] for t in snapshot["types"]} == {"T4": 1, "V100": 0}


def test_an_elastic_request_takes_fewer_gpus_and_preempts_only_for_its_least(tmp_path: Path) -> None:
    ledger = GpuAllocator([Gpu(0, "T4"), Gpu(1, "T4"), Gpu(2, "T4")], tmp_path)
    me = os.getpid()
    assert ledger.try_acquire("holder", me, 2, preemptible=True, priority=100) == [0, 1]
    # 1 to 3 replicas of 1 GPU: the one free GPU now, no preemption for the other two
    assert ledger.try_acquire("elastic", me, 3, fewer=(2, 1)) == [2]
    assert ledger.preemption("holder") is None
    ledger.release("elastic")
    # at least 2 of 3 GPUs when 1 is free: the low holder is asked to make room for 2
    assert ledger.try_acquire("wide", me, 3, fewer=(2,)) is None
    assert ledger.preemption("holder") is not None
    with pytest.raises(ValueError):  # even its least cannot fit this machine
        ledger.try_acquire("huge", me, 8, fewer=(5, 4))
