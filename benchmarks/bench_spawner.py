"""Benchmark: KubeLabSpawner against plain KubeSpawner on the same Kubernetes API test server.

Prints JSON lines (medians in seconds, ratios = KubeLabSpawner over the baseline in the same
run, so they read the same on any machine):

- `spawner_start`: one `start()` to a Running pod, per-user namespace mode. KubeLabSpawner also
  creates the ServiceAccount, Role, RoleBinding, ResourceQuota and two PVCs and runs admission.
- `form_availability`: rendering the spawn form. KubeLabSpawner reads GPU availability from its
  watch; the baselines are KubeSpawner's profile form and listing nodes and pods per page view.
- `spawn_100_users`: 100 users' `start()` at once (asyncio.gather on one hub loop).

The test server (`python -m kubeapi`, its own process, as a real API server would be) plays the
kubelet: a thread marks new pods Running through its controls. Run:
`python benchmarks/bench_spawner.py [--rounds 15] [--users 100]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KUBECONFIG = Path(tempfile.mkdtemp()) / "kubeconfig"
os.environ["KUBECONFIG"] = str(KUBECONFIG)  # read by kubernetes_asyncio at import

import requests  # noqa: E402
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


# `python -m kubeapi` with a listen backlog fit for 100 clients connecting at once (socketserver's
# default of 5 drops connections, which clients see as multi-second connect retries).
SERVE = (
    "import sys; from kubeapi import server; server.ApiHTTPServer.request_queue_size = 1024; "
    "from kubeapi.__main__ import main; sys.exit(main(sys.argv[1:]))"
)


class Kubelet(threading.Thread):
    """Marks every new pod Running, as a node's kubelet would, through the server's controls."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.url, self.done = url, threading.Event()
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def control(self, method: str, **kwargs: Any) -> Any:
        reply = self.session.post(f"{self.url}/_control/{method}", json=kwargs, timeout=60)
        reply.raise_for_status()
        return reply.json() if reply.content else None

    def run(self) -> None:
        while not self.done.wait(0.01):
            pods = self.session.get(
                f"{self.url}/api/v1/pods", params={"fieldSelector": "status.phase=Pending"}, timeout=60
            ).json()["items"]
            for pod in pods:
                with contextlib.suppress(requests.HTTPError):  # deleted meanwhile
                    self.control(
                        "run_pod",
                        namespace=pod["metadata"]["namespace"],
                        name=pod["metadata"]["name"],
                        pod_ip="127.0.0.1",
                    )


def make(cls: type, name: str, config: Config) -> Any:
    hub = types.SimpleNamespace(
        public_host="", url="http://hub:8081/hub/", base_url="/hub/", api_url="http://hub:8081/hub/api"
    )
    user = types.SimpleNamespace(name=name, id=0, url=f"/user/{name}/", escaped_name=name, groups=[])
    return cls(config=config, user=user, hub=hub)


def configs() -> tuple[Config, Config]:
    plain = Config()
    plain.KubeSpawner.enable_user_namespaces = True
    plain.KubeSpawner.events_enabled = False
    plain.KubeSpawner.cmd = ["jupyterhub-singleuser"]
    plain.KubeSpawner.profile_list = PROFILES
    lab = Config()
    lab.KubeLabSpawner.enable_user_namespaces = True
    lab.KubeLabSpawner.events_enabled = False
    lab.KubeLabSpawner.cmd = ["jupyterhub-singleuser"]
    lab.KubeLabSpawner.gpu_catalog = CATALOG
    return plain, lab


async def timed_start(spawner: Any, options: dict[str, Any]) -> float:
    spawner.user_options = options
    began = time.perf_counter()
    await spawner.start()
    elapsed = time.perf_counter() - began
    await spawner.stop(now=True)
    return elapsed


async def bench(rounds: int, users: int) -> list[dict[str, Any]]:
    from kubernetes_asyncio import client, config
    from kubespawner import KubeSpawner

    from kubelab.spawner import KubeLabSpawner

    plain_config, lab_config = configs()
    results = []
    # -- one start, alternating so drift hits both alike ------------------------------------
    plain_times, lab_times = [], []
    for i in range(rounds):
        plain_times.append(await timed_start(make(KubeSpawner, f"plain{i}", plain_config), {}))
        lab_times.append(await timed_start(make(KubeLabSpawner, f"lab{i}", lab_config), {"gpus": "1(T4)"}))
    results.append(
        {
            "bench": "spawner_start",
            "rounds": rounds,
            "kubespawner_median_s": statistics.median(plain_times),
            "kubelabspawner_median_s": statistics.median(lab_times),
            "ratio": statistics.median(lab_times) / statistics.median(plain_times),
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

        nodes = await core.list_node(_preload_content=False)
        pods = await core.list_pod_for_all_namespaces(_preload_content=False)
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
    for cfg in (plain_config, lab_config):
        cfg[next(iter(cfg))].k8s_api_request_timeout = 30

    async def crowd(cls: type, prefix: str, options: dict[str, Any]) -> tuple[float, list[float]]:
        spawners = [
            make(cls, f"{prefix}{i}", lab_config if cls is KubeLabSpawner else plain_config)
            for i in range(users)
        ]

        async def one(spawner: Any) -> float:
            spawner.user_options = dict(options)
            began = time.perf_counter()
            await spawner.start()
            return time.perf_counter() - began

        began = time.perf_counter()
        starts = sorted(await asyncio.gather(*(one(s) for s in spawners)))
        total = time.perf_counter() - began
        await asyncio.gather(*(s.stop(now=True) for s in spawners))
        return total, starts

    plain_total, plain_starts = await crowd(KubeSpawner, "pcrowd", {})
    lab_total, lab_starts = await crowd(KubeLabSpawner, "crowd", {"gpus": "1(T4)"})
    results.append(
        {
            "bench": "spawn_100_users",
            "users": users,
            "kubelabspawner_total_s": lab_total,
            "kubelabspawner_median_start_s": statistics.median(lab_starts),
            "kubelabspawner_p95_start_s": lab_starts[int(0.95 * (users - 1))],
            "kubespawner_total_s": plain_total,
            "kubespawner_median_start_s": statistics.median(plain_starts),
            "ratio": lab_total / plain_total,
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
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, "--port", "0", "--kubeconfig", str(KUBECONFIG)],
        cwd=REPO / "tests",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url, token = server.stdout.readline().strip(), server.stdout.readline().strip()
        kubelet = Kubelet(url, token)
        for name, label in (("t4", "T4"), ("v100", "V100")):
            kubelet.control(
                "add_node",
                name=name,
                cpu="512",
                memory="2Ti",
                gpus=128,
                labels={"gpu-type": label},
                pods=1000,
            )
        kubelet.start()
        try:
            for line in asyncio.run(bench(args.rounds, args.users)):
                print(json.dumps(line), flush=True)
        finally:
            kubelet.done.set()
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
