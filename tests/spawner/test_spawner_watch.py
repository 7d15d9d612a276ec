"""The availability watch against the real control plane, the GPU launcher of local notebooks,
and the GPU culler's choice of servers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from controlplane.cluster import ControlPlane, NodeSpec

from kubelab.spawner.availability import ClusterAvailability, TypeCount
from kubelab.spawner.culling import idle_gpu_servers
from kubelab.spawner.profiles import Catalog


async def _until(check: Callable[[], object], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the watch did not catch up")
        await asyncio.sleep(0.05)


def gpu_pod(name: str, user: str, gpus: int, selector: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubelab.io/user": user}},
        "spec": {
            "nodeSelector": selector,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


def test_the_watch_follows_nodes_and_pods_without_listing_per_view(simulated_cluster: ControlPlane) -> None:
    from kubernetes_asyncio import client, config

    # GPU types of this test's own (label values unique to it, so the session's other nodes and
    # pods are not counted)
    tag = uuid.uuid4().hex[:6]
    t4, v100, user = f"T4-{tag}", f"V100-{tag}", f"ann-{tag}"
    catalog = Catalog.parse(
        {"gpu_types": [{"name": "T4", "label_value": t4}, {"name": "V100", "label_value": v100}]}
    )
    simulated_cluster.add_node(NodeSpec(f"t4-{tag}", gpus=2, gpu_type=t4))
    simulated_cluster.wait_node_ready(f"t4-{tag}")
    pod_name = f"a-{tag}"

    async def scenario() -> None:
        api_client = await config.new_client_from_config(str(simulated_cluster.kubeconfig))
        async with api_client:
            watch = ClusterAvailability(client.CoreV1Api(api_client), catalog)
            await watch.start()
            assert watch.current().types == {"T4": TypeCount(2, 2), "V100": TypeCount(0, 0)}
            first = watch.current()
            assert watch.current() is first  # cached until something changes
            simulated_cluster.add_node(NodeSpec(f"v100-{tag}", gpus=8, gpu_type=v100))
            await _until(lambda: watch.current().types["V100"] == TypeCount(8, 8))
            simulated_cluster.request(
                "POST", "/api/v1/namespaces/default/pods", gpu_pod(pod_name, user, 3, {"gpu-type": v100})
            )
            await _until(lambda: watch.current().types["V100"].free == 5)
            await _until(lambda: watch.current().user(user).gpus == 3)  # KWOK runs it
            simulated_cluster.end_pod("default", pod_name)
            await _until(lambda: watch.current().types["V100"].free == 8)
            await watch.stop()

    try:
        asyncio.run(scenario())
    finally:
        simulated_cluster.request("DELETE", f"/api/v1/namespaces/default/pods/{pod_name}")
        for node in (f"t4-{tag}", f"v100-{tag}"):
            simulated_cluster.delete_node(node)


def test_gpu_exec_holds_gpus_for_the_server_process_itself(tmp_path: Path) -> None:
    env = {**os.environ, "KUBELAB_FAKE_GPUS": "Tesla T4,Tesla T4", "KUBELAB_MACHINE_DIR": str(tmp_path)}
    probe = (
        "import json, os; ledger = json.load(open(os.path.join(os.environ['KUBELAB_MACHINE_DIR'], "
        "'gpus.json'))); print(json.dumps({'visible': os.environ['CUDA_VISIBLE_DEVICES'], 'pid': os.getpid(), "
        "'holders': [h['pid'] for h in ledger['allocations'].values()]}))"
    )
    launch = [sys.executable, "-m", "kubelab.spawner.gpu_exec", "--run", "notebook/ann/public/default"]
    done = subprocess.run(
        [*launch, "--gpus", "2", "--type", "T4", "--", sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    seen = json.loads(done.stdout)
    assert seen["visible"] == "0,1" and seen["holders"] == [seen["pid"], seen["pid"]]  # exec kept the pid
    too_many = subprocess.run(
        [*launch, "--gpus", "3", "--", "true"], env=env, capture_output=True, text=True, timeout=60
    )
    assert too_many.returncode == 3 and "asked for 3 GPU(s) but this machine has 2" in too_many.stderr
    holder = subprocess.Popen(
        [*launch, "--gpus", "2", "--", sys.executable, "-c", "import time; time.sleep(30)"], env=env
    )
    try:
        deadline = time.monotonic() + 20
        while holder.pid not in [
            h["pid"] for h in json.loads((tmp_path / "gpus.json").read_text())["allocations"].values()
        ]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        taken = subprocess.run(
            [
                sys.executable,
                "-m",
                "kubelab.spawner.gpu_exec",
                "--run",
                "notebook/bo/public/x",
                "--gpus",
                "1",
                "--",
                "true",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert taken.returncode == 3 and "were taken before this server started" in taken.stderr
        queue = json.loads((tmp_path / "gpus.json").read_text())["queue"]
        assert queue == []  # a refused server does not wait in line
    finally:
        holder.kill()
        holder.wait()
    no_gpus = subprocess.run(
        [*launch, "--", sys.executable, "-c", "import os; print(repr(os.environ['CUDA_VISIBLE_DEVICES']))"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert no_gpus.stdout.strip() == "''"


def test_the_gpu_culler_picks_idle_gpu_servers_only() -> None:
    now = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)

    def server(idle_minutes: float, options: dict[str, Any], ready: bool = True) -> dict[str, Any]:
        last = (now - timedelta(minutes=idle_minutes)).isoformat().replace("+00:00", "Z")
        return {"ready": ready, "last_activity": last, "user_options": options}

    users = [
        {"name": "ann", "servers": {"": server(45, {"gpus": "1(V100)"}), "cpu": server(600, {"gpus": 0})}},
        {"name": "bo", "servers": {"big": server(31, {"gpus": 2}), "new": server(5, {"gpus": 1})}},
        {"name": "cy", "servers": {"": server(90, {"gpus": 1}, ready=False)}},
        {"name": "di", "servers": {"": server(90, {"gpus": "-1"})}},
    ]
    assert idle_gpu_servers(users, 30 * 60, now) == [("ann", ""), ("bo", "big")]
