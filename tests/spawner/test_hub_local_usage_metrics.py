"""The local hub's usage series: GPU-hours from the machine ledger (a real `GpuAllocator` in a
temporary folder) and utilisation from NVML answers recorded on an H200 that two processes
shared, read for real processes, exported through prometheus_client's text format as
/hub/metrics does.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.spawner.gpu_usage import NvmlUsage
from kubelab.spawner.local_usage_metrics import LocalCollector, LocalServer, LocalUsage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from recorded_nvml import RecordedNvml

ALICE_RUN = "notebook/alice/public/default"
CAROL_RUN = "notebook/carol/vision/default"
H200 = "NVIDIA H200"


@pytest.fixture
def two_processes() -> Iterator[tuple[int, int]]:
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    first, second = subprocess.Popen(sleeper), subprocess.Popen(sleeper)
    try:
        yield first.pid, second.pid
    finally:
        for process in (first, second):
            process.kill()
            process.wait()


def shared_h200(tmp_path: Path, alice: int, mallory: int) -> GpuAllocator:
    """Alice's notebook holds half the H200; Mallory's process holds the other half under the
    ledger name of Carol's notebook (any user's run writes the ledger)."""
    allocator = GpuAllocator([Gpu(0, H200)], tmp_path)
    assert allocator.try_acquire(ALICE_RUN, alice, 0.5, "H200") == [0]
    assert allocator.try_acquire(CAROL_RUN, mallory, 0.5, "H200") == [0]
    return allocator


def test_each_servers_gpus_and_utilisation_are_its_own_and_a_forged_ledger_entry_counts_for_nobody(
    tmp_path: Path, two_processes: tuple[int, int]
) -> None:
    alice, mallory = two_processes
    allocator = shared_h200(tmp_path, alice, mallory)
    nvml = RecordedNvml("nvml_h200_two_runs.json", pids={"process-1": alice, "process-2": mallory})
    usage = LocalUsage(allocator, NvmlUsage(nvml, allocator.holdings))
    # the hub started Carol's server as another pid: the ledger entry under her name is not hers
    usage.servers = {
        ("alice", ""): LocalServer(alice, ALICE_RUN, "public"),
        ("carol", ""): LocalServer(999_999_999, CAROL_RUN, "vision"),
    }
    rounds = [usage.read() for _ in range(5)]
    assert [r.held for r in rounds] == [{(H200, "public", "alice"): 0.5}] * 5
    # alice's process's own samples, never the 92% of Mallory's beside it on the same GPU
    assert [r.utilisation for r in rounds] == [
        {("public", "alice"): 2.0},
        {("public", "alice"): 60.0},
        {("public", "alice"): 60.0},
        {("public", "alice"): 40.0},
        {("public", "alice"): 0.0},  # NVML's NotFound once both ended: idle, not unknown
    ]


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith("jupyterhub_kubelab_")
    }


def test_scrapes_export_gpu_hours_and_utilisation_without_waiting_on_nvml(
    tmp_path: Path, two_processes: tuple[int, int]
) -> None:
    alice, mallory = two_processes
    allocator = shared_h200(tmp_path, alice, mallory)
    nvml = RecordedNvml("nvml_h200_two_runs.json", pids={"process-1": alice, "process-2": mallory})
    usage = LocalUsage(allocator, NvmlUsage(nvml, allocator.holdings), ttl=3600)
    clock = [0.0]
    servers = {("alice", ""): LocalServer(alice, ALICE_RUN, "public")}
    registry = CollectorRegistry()
    registry.register(LocalCollector(usage, lambda: servers, lambda: clock[0]))
    assert scrape(registry) == {}  # the reading is on its way: no zeros meanwhile
    deadline = time.monotonic() + 30
    while usage.answer.read_at is None and time.monotonic() < deadline:
        time.sleep(0.02)
    hours = (
        "jupyterhub_kubelab_gpu_hours_total",
        (("gpu_type", H200), ("group", "public"), ("user", "alice")),
    )
    busy = ("jupyterhub_kubelab_gpu_utilisation_percent", (("group", "public"), ("user", "alice")))
    assert scrape(registry) == {hours: 0.0, busy: 2.0}
    clock[0] += 3600
    assert scrape(registry) == {hours: 0.5, busy: 2.0}  # half the H200 for an hour
    assert nvml.calls[(0, "process_utilization")] == 1  # one NVML reading for three scrapes in the TTL


def test_without_nvml_the_local_hub_still_counts_gpu_hours(
    tmp_path: Path, two_processes: tuple[int, int]
) -> None:
    alice, mallory = two_processes
    usage = LocalUsage(shared_h200(tmp_path, alice, mallory), None)
    usage.servers = {("alice", ""): LocalServer(alice, ALICE_RUN, "public")}
    assert usage.read().held == {(H200, "public", "alice"): 0.5}
    assert usage.read().utilisation is None
