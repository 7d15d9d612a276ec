"""GPU idleness: the policy, the clock, and the two sources that feed it (recorded answers).

NVML's per-process samples and a Prometheus answer with DCGM's series are recorded shapes
(tests/core/fixtures, written from their references); the processes, the GPU ledger and the
Prometheus HTTP server are real.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubelab_testing import JsonStandIn

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.errors import ValidationError
from kubelab.spawner.gpu_idleness import IdlePolicy, IdleTracker, parse_idle_policy
from kubelab.spawner.gpu_usage import (
    NvmlUsage,
    PrometheusUsage,
    hub_started,
    notebook_pods,
    process_tree,
)
from kubelab.spawner.groups import parse_group

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from recorded_nvml import RecordedNvml

pytestmark = pytest.mark.fast
ALICE = ("alice", "")
MIN = 60.0


def test_a_policy_is_read_over_the_defaults_and_bad_keys_are_named() -> None:
    assert parse_idle_policy(None, "gpu_idle") == IdlePolicy()
    assert parse_idle_policy({"minutes": 60}, "gpu_idle") == IdlePolicy(minutes=60)
    with pytest.raises(ValidationError) as caught:
        parse_idle_policy({"minuts": 60, "threshold": "low", "warn_minutes": -1}, "groups.ml.gpu_idle")
    reasons = {f.path: f.reason for f in caught.value.fields}
    assert reasons["groups.ml.gpu_idle.minuts"].startswith("unknown key; did you mean 'minutes'")
    assert "must be a number" in reasons["groups.ml.gpu_idle.threshold"]
    assert "at least 0" in reasons["groups.ml.gpu_idle.warn_minutes"]
    with pytest.raises(ValidationError, match="warn_minutes: must not exceed minutes"):
        parse_idle_policy({"minutes": 5, "warn_minutes": 10}, "gpu_idle")
    with pytest.raises(ValidationError, match="threshold: is a utilisation in percent"):
        parse_idle_policy({"threshold": 500}, "gpu_idle")


def test_a_group_with_a_bad_gpu_idle_property_is_refused_by_name() -> None:
    assert parse_group("ml", {"gpu_idle": {"minutes": 45}}).name == "ml"
    with pytest.raises(ValidationError) as caught:
        parse_group("ml", {"gpu_idle": {"minutes": "soon"}})
    assert [f.path for f in caught.value.fields] == ["groups.ml.gpu_idle.minutes"]


def test_the_clock_warns_then_culls_and_busy_or_unknown_samples_reset_it() -> None:
    policy = IdlePolicy(threshold=5, minutes=30, warn_minutes=5)
    tracker = IdleTracker()
    assert tracker.observe(ALICE, 0, 3.0, policy) == "idle"
    assert tracker.observe(ALICE, 24 * MIN, 1.0, policy) == "idle"
    assert tracker.observe(ALICE, 25 * MIN, 4.9, policy) == "warn"
    assert tracker.warned(ALICE) == 25 * MIN
    assert tracker.observe(ALICE, 29 * MIN, 0.0, policy) == "idle"  # the warning's lead runs
    assert tracker.observe(ALICE, 30 * MIN, 0.0, policy) == "cull"

    assert tracker.observe(ALICE, 31 * MIN, 50.0, policy) == "busy"  # busy: the clock restarts
    assert tracker.warned(ALICE) is None
    assert tracker.observe(ALICE, 32 * MIN, 0.0, policy) == "idle"
    assert tracker.observe(ALICE, 33 * MIN, None, policy) == "unknown"  # no source: never idle
    assert tracker.observe(ALICE, 34 * MIN, 0.0, policy) == "idle"
    assert tracker.observe(ALICE, 58 * MIN, 0.0, policy) == "idle"
    assert tracker.observe(ALICE, 59 * MIN, 0.0, policy) == "warn"


def test_keep_running_restarts_the_clock_once_per_warning() -> None:
    policy = IdlePolicy(minutes=30, warn_minutes=5)
    tracker = IdleTracker()
    assert not tracker.keep(ALICE, 0)  # nothing to answer
    tracker.observe(ALICE, 0, 0.0, policy)
    assert tracker.observe(ALICE, 25 * MIN, 0.0, policy) == "warn"
    assert tracker.keep(ALICE, 26 * MIN)
    assert not tracker.keep(ALICE, 27 * MIN)  # the same warning answered twice
    assert tracker.observe(ALICE, 30 * MIN, 0.0, policy) == "idle"  # not culled: the clock restarted
    assert tracker.observe(ALICE, 51 * MIN, 0.0, policy) == "warn"
    assert tracker.observe(ALICE, 56 * MIN, 0.0, policy) == "cull"


def test_stopped_servers_are_forgotten() -> None:
    tracker = IdleTracker()
    tracker.observe(ALICE, 0, 0.0, IdlePolicy())
    tracker.observe(("bob", "gpu"), 0, 0.0, IdlePolicy())
    tracker.forget_except({("bob", "gpu")})
    assert set(tracker.clocks) == {("bob", "gpu")}


SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]


def stand_in(user: str, server: str = "", command: list[str] = SLEEP) -> subprocess.Popen[str]:
    """A stand-in notebook server started as the hub starts one: this test process is its hub,
    and its environment names its user and server."""
    env = {**os.environ, "JUPYTERHUB_USER": user, "JUPYTERHUB_SERVER_NAME": server}
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def ended(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        process.kill()
        process.wait()


@pytest.fixture
def notebook() -> Iterator[subprocess.Popen[str]]:
    """A stand-in notebook server: a real process with a real child (its "kernel")."""
    code = "import subprocess, sys; k = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); print(k.pid, flush=True); k.wait()"
    server = stand_in("alice", command=[sys.executable, "-c", code])
    assert server.stdout is not None
    server.kernel = int(server.stdout.readline())  # type: ignore[attr-defined]
    yield server
    os.kill(server.kernel, 9)  # type: ignore[attr-defined]
    ended(server)


def test_nvml_usage_sums_each_notebooks_process_tree_and_reads_a_lone_gpu_whole(
    notebook: subprocess.Popen[str], tmp_path: Path
) -> None:
    kernel: int = notebook.kernel  # type: ignore[attr-defined]
    assert process_tree(notebook.pid) == {notebook.pid, kernel}
    allocator = GpuAllocator([Gpu(0, "NVIDIA A100-SXM4-80GB"), Gpu(1, "Tesla T4")], tmp_path)
    assert allocator.try_acquire("notebook/alice/public/default", notebook.pid, 1, "A100") == [0]
    bob = stand_in("bob", "gpu")
    try:
        assert allocator.try_acquire("notebook/bob/ml/gpu", bob.pid, 1, "T4") == [1]
        nvml = RecordedNvml(
            "nvml_notebooks.json",
            pids={"alice-server": notebook.pid, "alice-kernel": kernel, "stranger": 999_999_999},
        )
        usage = NvmlUsage(nvml, allocator.holdings, vouch=hub_started(os.getpid()))
        servers = [ALICE, ("bob", "gpu"), ("carol", "")]
        # the kernel's two samples average 90%; a stranger's process on the same GPU is not alice's
        assert usage.utilisation(servers) == {ALICE: 90.0, ("bob", "gpu"): 4.0}
        # NotFound: nothing ran a kernel since the last round — idle, not unknown
        assert usage.utilisation(servers) == {ALICE: 0.0, ("bob", "gpu"): 4.0}
        # the server's and its kernel's samples add up; bob's T4 woke up
        assert usage.utilisation(servers) == {ALICE: 3.0, ("bob", "gpu"): 97.0}
    finally:
        ended(bob)


def test_a_ledger_entry_counts_only_for_the_server_the_hub_started_under_that_name(
    notebook: subprocess.Popen[str], tmp_path: Path
) -> None:
    """Every server's account may write the ledger. Mallory names Carol's notebook as the holder
    of a GPU and points it at an idle process: at alice's server (the hub's child, but alice's),
    then at a process of her own (not the hub's child). Neither makes Carol's notebook look idle:
    Carol is left out of the answer, so the culler falls back to her activity."""
    kernel: int = notebook.kernel  # type: ignore[attr-defined]
    allocator = GpuAllocator([Gpu(0, "NVIDIA A100-SXM4-80GB"), Gpu(1, "Tesla T4")], tmp_path)
    assert allocator.try_acquire("notebook/alice/public/default", notebook.pid, 1, "A100") == [0]
    pids = {"alice-server": notebook.pid, "alice-kernel": kernel, "stranger": 999_999_999}
    carol = ("carol", "")
    vouch = hub_started(os.getpid())
    assert vouch(notebook.pid, ALICE) and not vouch(notebook.pid, carol)
    assert not vouch(kernel, ALICE)  # alice's own kernel is not the server the hub started
    assert allocator.try_acquire("notebook/carol/public/default", notebook.pid, 1, "T4") == [1]
    usage = NvmlUsage(RecordedNvml("nvml_notebooks.json", pids=pids), allocator.holdings, vouch=vouch)
    assert usage.utilisation([ALICE, carol]) == {ALICE: 90.0}
    allocator.release("notebook/carol/public/default")
    assert allocator.try_acquire("notebook/carol/public/default", kernel, 1, "T4") == [1]
    assert usage.utilisation([ALICE, carol]) == {ALICE: 0.0}


def test_a_shared_gpu_without_per_process_samples_is_not_guessed(tmp_path: Path) -> None:
    allocator = GpuAllocator([Gpu(0, "NVIDIA A100-SXM4-80GB"), Gpu(1, "Tesla T4")], tmp_path)
    bob = stand_in("bob")
    try:
        assert allocator.try_acquire("notebook/bob/ml/default", bob.pid, 0.5, "T4") == [1]
        assert allocator.try_acquire("run-7", os.getpid(), 0.5, "T4") == [1]
        usage = NvmlUsage(
            RecordedNvml("nvml_notebooks.json"), allocator.holdings, vouch=hub_started(os.getpid())
        )
        assert usage.utilisation([("bob", "")]) == {}  # the T4 is shared and keeps no per-process samples
        allocator.release("run-7")
        assert usage.utilisation([("bob", "")]) == {("bob", ""): 4.0}  # held alone: read whole
    finally:
        ended(bob)


def test_two_notebooks_sharing_a_real_h200_are_each_read_from_their_own_samples(tmp_path: Path) -> None:
    """Answers recorded on an H200 while two processes shared GPU 0, then after both ended."""
    first, second = stand_in("alice"), stand_in("bob")
    bob = ("bob", "")
    try:
        allocator = GpuAllocator([Gpu(0, "NVIDIA H200")], tmp_path)
        assert allocator.try_acquire("notebook/alice/public/default", first.pid, 0.5, "H200") == [0]
        assert allocator.try_acquire("notebook/bob/ml/default", second.pid, 0.5, "H200") == [0]
        pids = {"process-1": first.pid, "process-2": second.pid}
        nvml = RecordedNvml("nvml_h200_two_runs.json", pids=pids)
        usage = NvmlUsage(nvml, allocator.holdings, vouch=hub_started(os.getpid()))
        rounds = [usage.utilisation([ALICE, bob]) for _ in range(5)]
    finally:
        ended(first, second)
    # each notebook is read from its own process's samples, never the GPU's whole 100%
    assert rounds[:4] == [
        {ALICE: 2.0, bob: 92.0},
        {ALICE: 60.0, bob: 40.0},
        {ALICE: 60.0, bob: 40.0},
        {ALICE: 40.0, bob: 60.0},
    ]
    assert rounds[4] == {ALICE: 0.0, bob: 0.0}  # NotFound once both ended: idle, not unknown


POD = "jupyter-alice"


def notebook_pod(namespace: str, name: str, user: str, label_user: str, server: str = "") -> dict[str, Any]:
    annotations = {"hub.jupyter.org/username": user}
    if server:
        annotations["hub.jupyter.org/servername"] = server
    return {
        "metadata": {
            "namespace": namespace,
            "name": name,
            "labels": {"component": "singleuser-server", "kubelab.io/user": label_user},
            "annotations": annotations,
        }
    }


def user_namespace(name: str, user: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "kubelab", "kubelab.io/user": user},
        }
    }


def test_notebook_pods_are_owned_by_their_namespace_not_by_annotations_a_user_can_copy() -> None:
    namespaces = [user_namespace("lab-alice", "alice"), user_namespace("lab-mallory", "mallory")]
    pods = [
        notebook_pod("lab-alice", POD, "alice", "alice"),
        notebook_pod("lab-alice", "jupyter-alice--big", "alice", "alice", server="big"),
        # mallory's own pod claiming to be alice's notebook, to keep alice's GPUs busy-looking
        notebook_pod("lab-mallory", "fake", "alice", "alice"),
        notebook_pod("lab-mallory", "fake2", "alice", "mallory"),
        {"metadata": {"namespace": "lab-alice", "name": "job-pod", "labels": {}, "annotations": {}}},
    ]
    assert notebook_pods(pods, namespaces) == {
        ("lab-alice", POD): ("alice", ""),
        ("lab-alice", "jupyter-alice--big"): ("alice", "big"),
    }


@pytest.fixture
def prometheus() -> Iterator[JsonStandIn]:
    """A Prometheus HTTP API answering `/api/v1/query`; each test sets the answer it records."""
    with JsonStandIn(lambda path: {}) as stand_in:
        yield stand_in


def queries(prometheus: JsonStandIn) -> list[str]:
    return [parse_qs(urlsplit(path).query)["query"][0] for path in prometheus.paths]


def vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    """Prometheus' instant-query answer shape (`resultType: vector`, values as strings)."""
    now = time.time()
    result: list[dict[str, Any]] = []
    for labels, value in series:
        metric = {"__name__": "DCGM_FI_DEV_GPU_UTIL", **labels}
        result.append({"metric": metric, "value": [now, str(value)]})
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def test_prometheus_usage_reads_dcgm_by_pod_with_or_without_exported_labels(prometheus: JsonStandIn) -> None:
    answer = vector(
        (
            {
                "exported_namespace": "lab-alice",
                "exported_pod": POD,
                "namespace": "gpu-operator",
                "pod": "dcgm-x",
            },
            2.5,
        ),
        ({"namespace": "lab-bob", "pod": "jupyter-bob"}, 71.0),
        ({"namespace": "lab-bob", "pod": "some-job"}, 100.0),
    )
    prometheus.answer = lambda path: answer
    pods = {("lab-alice", POD): ALICE, ("lab-bob", "jupyter-bob"): ("bob", "")}
    usage = PrometheusUsage(prometheus.url, 300, lambda: pods)
    assert usage.utilisation([ALICE, ("bob", ""), ("carol", "")]) == {ALICE: 2.5, ("bob", ""): 71.0}
    assert queries(prometheus) == [
        "max by (namespace, pod, exported_namespace, exported_pod) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[300s]))"
    ]


def test_a_prometheus_error_is_raised_with_its_reason(prometheus: JsonStandIn) -> None:
    prometheus.answer = lambda path: {"status": "error", "errorType": "bad_data", "error": "parse error"}
    usage = PrometheusUsage(prometheus.url, 60, dict)
    with pytest.raises(RuntimeError, match="Prometheus answered bad_data: parse error"):
        usage.utilisation([ALICE])
