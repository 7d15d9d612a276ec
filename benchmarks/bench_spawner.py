"""Benchmark: KubeLabSpawner against plain KubeSpawner on the same real Kubernetes API server.

Prints JSON lines (medians in seconds, ratios = KubeLabSpawner over the baseline in the same
run, so they read the same on any machine):

- `spawner_start`: one `start()` to a Running pod, per-user namespace mode. KubeLabSpawner also
  creates the ServiceAccount, Role, RoleBinding, ResourceQuota and two PVCs and runs admission.
  On a real API server a pod that mounts a claim waits for it to be bound (provisioner, then the
  scheduler's retry), so a second baseline is KubeSpawner with a home claim of its own.
- `form_availability`: rendering the spawn form. KubeLabSpawner reads GPU availability from its
  watch; the baselines are KubeSpawner's profile form and listing nodes and pods per page view.
- `spawn_100_users`: 100 users' `start()` at once (asyncio.gather on one hub loop).

The cluster is tests/controlplane's: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler on loopback, with KWOK nodes playing the kubelet (a scheduled pod starts at once
with IP 127.0.0.1). Both spawners use the admin's kubeconfig. Run:
`python benchmarks/bench_spawner.py [--rounds 15] [--users 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KUBECONFIG = Path(tempfile.mkdtemp()) / "kubeconfig"
os.environ["KUBECONFIG"] = str(KUBECONFIG)  # read by kubernetes_asyncio at import
sys.path.insert(0, str(REPO / "tests"))

from controlplane.cluster import ControlPlane, NodeSpec  # noqa: E402
from traitlets.config import Config  # noqa: E402

CATALOG = {
    "gpu_types": [{"name": "T4", "max_per_user": 8}, {"name": "V100", "max_per_user": 8}],
    "images": ["lab/notebook:1"],
}
PROFILES = [
    {
        "display_name": f"{n} x {t}",
        "slug": f"{n}-{t}".lower(),
        "kubespawner_override": {"extra_resource_limits": {"nvidia.com/gpu": str(n)}},
    }
    for t in ("T4", "V100")
    for n in (0, 1, 2)
]
# GPU nodes (tainted, as GPU pools are) for KubeLabSpawner's 1 x T4 pods and CPU nodes for plain
# KubeSpawner's default profile; 110 pods a node, room for 100 users of each at once.
NODES = (
    NodeSpec("t4-0", cpu="512", memory="2Ti", gpus=128, gpu_type="T4"),
    NodeSpec("t4-1", cpu="512", memory="2Ti", gpus=128, gpu_type="T4"),
    NodeSpec("v100-0", cpu="512", memory="2Ti", gpus=128, gpu_type="V100"),
    NodeSpec("cpu-0", cpu="512", memory="2Ti"),
    NodeSpec("cpu-1", cpu="512", memory="2Ti"),
)


def make(cls: type, name: str, config: Config) -> Any:
    hub = types.SimpleNamespace(
        public_host="", url="http://hub:8081/hub/", base_url="/hub/", api_url="http://hub:8081/hub/api"
    )
    user = types.SimpleNamespace(name=name, id=0, url=f"/user/{name}/", escaped_name=name, groups=[])
    return cls(config=config, user=user, hub=hub)


def configs(api_port: int) -> tuple[Config, Config, Config]:
    """Plain KubeSpawner (no volumes), the same with a home claim of its own (KubeSpawner's
    `storage_pvc_ensure`), and KubeLabSpawner (a workspace and an archive claim)."""
    plain = Config()
    plain.KubeSpawner.enable_user_namespaces = True
    plain.KubeSpawner.events_enabled = False
    plain.KubeSpawner.cmd = ["jupyterhub-singleuser"]
    plain.KubeSpawner.profile_list = PROFILES
    storage = Config()
    storage.merge(plain)
    storage.KubeSpawner.storage_pvc_ensure = True
    storage.KubeSpawner.storage_capacity = "50Gi"
    storage.KubeSpawner.pvc_name_template = "claim-{username}"
    claim = {"claimName": "claim-{username}"}
    storage.KubeSpawner.volumes = [{"name": "home", "persistentVolumeClaim": claim}]
    storage.KubeSpawner.volume_mounts = [{"name": "home", "mountPath": "/home/jovyan"}]
    lab = Config()
    lab.KubeLabSpawner.enable_user_namespaces = True
    lab.KubeLabSpawner.events_enabled = False
    lab.KubeLabSpawner.cmd = ["jupyterhub-singleuser"]
    lab.KubeLabSpawner.gpu_catalog = CATALOG
    # a loopback API server has no `kubernetes` endpoints for the notebooks' egress rule
    lab.KubeLabSpawner.api_server_cidrs = ["127.0.0.1/32"]
    lab.KubeLabSpawner.api_server_ports = [api_port]
    return plain, storage, lab


FAILED_STARTS: dict[str, int] = {}


async def start_retrying(spawner: Any, attempts: int = 5) -> None:
    """`start()`, again after a failure (as the user would press Start again), counting the
    failures per class. In a new user namespace the real API server refuses pods until the
    ServiceAccount controller has made `default` there, which plain KubeSpawner does not wait
    for (403 "serviceaccount default not found")."""
    for attempt in range(attempts):
        try:
            await spawner.start()
            return
        except Exception:
            FAILED_STARTS[type(spawner).__name__] = FAILED_STARTS.get(type(spawner).__name__, 0) + 1
            await spawner.stop(now=True)
            if attempt == attempts - 1:
                raise


async def timed_start(spawner: Any, options: dict[str, Any]) -> float:
    spawner.user_options = options
    began = time.perf_counter()
    await start_retrying(spawner)
    elapsed = time.perf_counter() - began
    await spawner.stop(now=True)
    return elapsed


async def bench(rounds: int, users: int, api_port: int) -> list[dict[str, Any]]:
    from kubernetes_asyncio import client, config
    from kubespawner import KubeSpawner

    from kubelab.spawner import KubeLabSpawner

    plain_config, storage_config, lab_config = configs(api_port)
    results = []
    # -- one start, alternating so drift hits all alike -------------------------------------
    plain_times, storage_times, lab_times = [], [], []
    for i in range(rounds):
        plain_times.append(await timed_start(make(KubeSpawner, f"plain{i}", plain_config), {}))
        storage_times.append(await timed_start(make(KubeSpawner, f"pvc{i}", storage_config), {}))
        lab_times.append(await timed_start(make(KubeLabSpawner, f"lab{i}", lab_config), {"gpus": "1(T4)"}))
    results.append(
        {
            "bench": "spawner_start",
            "rounds": rounds,
            "failed_starts_retried": dict(FAILED_STARTS),
            "kubespawner_median_s": statistics.median(plain_times),
            "kubespawner_with_home_pvc_median_s": statistics.median(storage_times),
            "kubelabspawner_median_s": statistics.median(lab_times),
            "ratio": statistics.median(lab_times) / statistics.median(plain_times),
            "ratio_vs_home_pvc": statistics.median(lab_times) / statistics.median(storage_times),
        }
    )

    # -- the form --------------------------------------------------------------------------
    lab, plain = make(KubeLabSpawner, "viewer", lab_config), make(KubeSpawner, "viewer", plain_config)
    await lab.get_options_form()  # starts the watch once, as a hub does at its first page view
    api_client = await config.new_client_from_config(str(KUBECONFIG))
    core = client.CoreV1Api(api_client)

    async def list_per_view() -> None:
        from kubelab.spawner.availability import cluster_availability
        from kubelab.spawner.profiles import Catalog

        # unparsed answers (_preload_content=False), which the client's annotations do not name
        nodes: Any = await core.list_node(_preload_content=False)
        pods: Any = await core.list_pod_for_all_namespaces(_preload_content=False)
        cluster_availability(
            json.loads(await nodes.read())["items"],
            json.loads(await pods.read())["items"],
            Catalog.parse(CATALOG),
        )

    timings: dict[str, list[float]] = {"lab": [], "plain": [], "list": []}
    for _ in range(rounds * 10):
        for key, call in (
            ("lab", lab.get_options_form),
            ("plain", plain.get_options_form),
            ("list", list_per_view),
        ):
            began = time.perf_counter()
            await call()
            timings[key].append(time.perf_counter() - began)
    await api_client.close()
    med = {k: statistics.median(v) for k, v in timings.items()}
    results.append(
        {
            "bench": "form_availability",
            "views": rounds * 10,
            "kubelabspawner_median_s": med["lab"],
            "kubespawner_profile_form_median_s": med["plain"],
            "list_per_view_median_s": med["list"],
            "ratio": med["lab"] / med["plain"],
            "ratio_vs_list_per_view": med["lab"] / med["list"],
        }
    )

    # -- 100 users at once -----------------------------------------------------------------
    # kubernetes_asyncio pools 5 connections per CPU; with KubeSpawner's default 3 s request
    # timeout, 100 simultaneous namespace creations time out waiting for a connection (for
    # plain KubeSpawner too), so both get the 30 s a busy hub should configure.
    for cfg in (plain_config, storage_config, lab_config):
        cfg[next(iter(cfg))].k8s_api_request_timeout = 30

    async def crowd(
        cls: type, cfg: Config, prefix: str, options: dict[str, Any]
    ) -> tuple[float, list[float]]:
        spawners = [make(cls, f"{prefix}{i}", cfg) for i in range(users)]

        async def one(spawner: Any) -> float:
            spawner.user_options = dict(options)
            began = time.perf_counter()
            await start_retrying(spawner)
            return time.perf_counter() - began

        began = time.perf_counter()
        starts = sorted(await asyncio.gather(*(one(s) for s in spawners)))
        total = time.perf_counter() - began
        await asyncio.gather(*(s.stop(now=True) for s in spawners))
        return total, starts

    FAILED_STARTS.clear()
    plain_total, plain_starts = await crowd(KubeSpawner, plain_config, "pcrowd", {})
    storage_total, storage_starts = await crowd(KubeSpawner, storage_config, "vcrowd", {})
    lab_total, lab_starts = await crowd(KubeLabSpawner, lab_config, "crowd", {"gpus": "1(T4)"})
    results.append(
        {
            "bench": "spawn_100_users",
            "users": users,
            "failed_starts_retried": dict(FAILED_STARTS),
            "kubelabspawner_total_s": lab_total,
            "kubelabspawner_median_start_s": statistics.median(lab_starts),
            "kubelabspawner_p95_start_s": lab_starts[int(0.95 * (users - 1))],
            "kubespawner_total_s": plain_total,
            "kubespawner_median_start_s": statistics.median(plain_starts),
            "kubespawner_with_home_pvc_total_s": storage_total,
            "kubespawner_with_home_pvc_median_start_s": statistics.median(storage_starts),
            "ratio": lab_total / plain_total,
            "ratio_vs_home_pvc": lab_total / storage_total,
        }
    )
    await KubeLabSpawner.stop_watches()
    await KubeSpawner._stop_all_reflectors()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--users", type=int, default=100)
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    try:
        with ControlPlane(KUBECONFIG.parent / "cluster", nodes=NODES) as plane:
            shutil.copy(plane.kubeconfig, KUBECONFIG)
            for line in asyncio.run(bench(args.rounds, args.users, plane.port)):
                print(json.dumps(line), flush=True)
    finally:
        shutil.rmtree(KUBECONFIG.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
