"""The availability watch against the API test server, the GPU launcher of local notebooks,
and the GPU culler's choice of servers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from kubeapi import KubeApiServer

from kubelab.spawner.availability import ClusterAvailability, TypeCount
from kubelab.spawner.culling import idle_gpu_servers
from kubelab.spawner.profiles import Catalog

CATALOG = Catalog.parse({"gpu_types": [{"name": "T4"}, {"name": "V100"}]})


async def _until(check, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the watch did not catch up")
        await asyncio.sleep(0.05)


def gpu_pod(name: str, gpus: int, selector: dict) -> dict:
    return {
        "metadata": {"name": name, "labels": {"kubelab.io/user": "ann"}},
        "spec": {
            "nodeSelector": selector,
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


def test_the_watch_follows_nodes_and_pods_without_listing_per_view(tmp_path: Path) -> None:
    from kubernetes_asyncio import client, config

    with KubeApiServer() as kube:
        kube.add_node("t4", gpus=2, labels={"gpu-type": "T4"})
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")

        async def scenario() -> None:
            api_client = await config.new_client_from_config(str(kubeconfig))
            async with api_client:
                watch = ClusterAvailability(client.CoreV1Api(api_client), CATALOG)
                await watch.start()
                assert watch.current().types == {"T4": TypeCount(2, 2), "V100": TypeCount(0, 0)}
                first = watch.current()
                assert watch.current() is first  # cached until something changes
                kube.add_node("v100", gpus=8, labels={"gpu-type": "V100"})
                await _until(lambda: watch.current().types["V100"] == TypeCount(8, 8))
                kube.cluster.create(kube.cluster.rt("pods"), "default", gpu_pod("a", 3, {"gpu-type": "V100"}))
                await _until(lambda: watch.current().types["V100"].free == 5)
                kube.run_pod("default", "a")
                await _until(lambda: watch.current().user("ann").gpus == 3)
                kube.succeed_pod("default", "a")
                await _until(lambda: watch.current().types["V100"].free == 8)
                await watch.stop()

        asyncio.run(scenario())


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

    def server(idle_minutes: float, options: dict, ready: bool = True) -> dict:
        last = (now - timedelta(minutes=idle_minutes)).isoformat().replace("+00:00", "Z")
        return {"ready": ready, "last_activity": last, "user_options": options}

    users = [
        {"name": "ann", "servers": {"": server(45, {"gpus": "1(V100)"}), "cpu": server(600, {"gpus": 0})}},
        {"name": "bo", "servers": {"big": server(31, {"gpus": 2}), "new": server(5, {"gpus": 1})}},
        {"name": "cy", "servers": {"": server(90, {"gpus": 1}, ready=False)}},
        {"name": "di", "servers": {"": server(90, {"gpus": "-1"})}},
    ]
    assert idle_gpu_servers(users, 30 * 60, now) == [("ann", ""), ("bo", "big")]
