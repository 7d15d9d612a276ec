"""Benchmark: KubeLabSpawner against plain KubeSpawner on the same real Kubernetes API server.

Prints JSON lines (medians and percentiles in seconds; ratios = KubeLabSpawner over the baseline
measured in the same run, so they read the same on any machine):

- `spawner_start`: one `start()` to a Running pod on a quiet cluster (median of `--rounds`),
  per-user namespace mode, a fresh user each time. KubeLabSpawner also prepares the user's
  namespace bundle (ServiceAccount, Role, RoleBinding, ResourceQuota, NetworkPolicies, one
  claim) and runs admission. A pod that mounts a claim waits for it to be bound, so the fair
  baseline is KubeSpawner with a home claim of its own (`storage_pvc_ensure`).
- `form_availability`: rendering the spawn form. KubeLabSpawner reads GPU availability from its
  watch; the baselines are KubeSpawner's profile form and listing nodes and pods per page view.
- `spawn_storm`: `--users` users' `start()` at once on one hub loop (asyncio.gather), fresh
  users and then the same users returning: failures, p50/p95 per spawn, total, the p95 of
  an HTTP endpoint served on the same event loop (what the hub's API answers with meanwhile),
  and CPU per spawn of the hub and of each control-plane process, side by side with
  KubeSpawner with a home claim. Each phase runs for both sides back to back, each storm on a
  control plane back to its idle CPU use. A user whose start fails presses Start again a second
  later, on both sides alike, until 600 s have passed; a spawn's time runs from the first press.
- `api_requests_per_spawn`: what one spawn asks of the API server, first and returning,
  counted by a proxy in front of it (tests/controlplane/faults.py) on a hub already watching.
- `machine`: the CPUs and `uptime`'s load averages at the start and the end (each storm phase
  also records the 1-minute load before and after it).

The cluster is tests/controlplane's: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler on loopback, with KWOK nodes playing the kubelet (a scheduled pod starts at once
with IP 127.0.0.1). Both spawners use the admin's kubeconfig. Run:
`python benchmarks/bench_spawner.py [--rounds 10] [--users 50]`.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import itertools
import json
import os
import shutil
import statistics
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


def nodes(users: int) -> tuple[NodeSpec, ...]:
    """GPU nodes (tainted, as GPU pools are) for KubeLabSpawner's 1 x T4 pods and CPU nodes for
    plain KubeSpawner's default profile; 110 pods a node, room for every user of each at once."""
    per_kind = max(2, -(-users // 100) + 1)
    return (
        *(NodeSpec(f"t4-{i}", cpu="512", memory="2Ti", gpus=128, gpu_type="T4") for i in range(per_kind)),
        NodeSpec("v100-0", cpu="512", memory="2Ti", gpus=128, gpu_type="V100"),
        *(NodeSpec(f"cpu-{i}", cpu="512", memory="2Ti") for i in range(per_kind)),
    )


def make(cls: type, name: str, config: Config) -> Any:
    hub = types.SimpleNamespace(
        public_host="", url="http://hub:8081/hub/", base_url="/hub/", api_url="http://hub:8081/hub/api"
    )
    user = types.SimpleNamespace(name=name, id=0, url=f"/user/{name}/", escaped_name=name, groups=[])
    return cls(config=config, user=user, hub=hub)


def configs(api_port: int) -> tuple[Config, Config, Config]:
    """Plain KubeSpawner (no volumes), the same with a home claim of its own (KubeSpawner's
    `storage_pvc_ensure`), and KubeLabSpawner (one claim: the workspace and archive folders)."""
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
RETRY_PAUSE = 1.0  # a user pressing Start again after a failed start
STORM_PATIENCE = 600.0  # the shipped hub's start_timeout: a storm's user without a server by then failed


async def start_retrying(spawner: Any, attempts: int = 5, within: float | None = None) -> None:
    """`start()`, again a second after a failure (as the user would press Start again), `attempts`
    times or, with `within`, until that many seconds have passed; the failures are counted per
    class. In a new user namespace the real API server refuses pods until the ServiceAccount
    controller has made `default` there, which plain KubeSpawner does not wait for (403
    "serviceaccount default not found"). Storms give both sides the same patience (`within`):
    with three quick tries, a user whose tries were all refused ended within seconds and counted
    as a fast spawn in KubeSpawner's percentiles, and left its side a pod fewer to schedule."""
    began = time.perf_counter()
    for attempt in itertools.count(1):
        try:
            await spawner.start()
            return
        except Exception:
            FAILED_STARTS[type(spawner).__name__] = FAILED_STARTS.get(type(spawner).__name__, 0) + 1
            await spawner.stop(now=True)
            if (attempt >= attempts) if within is None else (time.perf_counter() - began >= within):
                raise
            await asyncio.sleep(RETRY_PAUSE)


async def timed_start(spawner: Any, options: dict[str, Any]) -> float:
    spawner.user_options = options
    began = time.perf_counter()
    await start_retrying(spawner)
    elapsed = time.perf_counter() - began
    await spawner.stop(now=True)
    return elapsed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


class LoopProbe:
    """An HTTP endpoint on the hub's event loop, asked every 50 ms from another thread: how long
    a hub API request waits while the loop spawns (JupyterHub's handlers run on that loop)."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self._stop = threading.Event()

    async def __aenter__(self) -> LoopProbe:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            await writer.drain()
            writer.close()

        self._server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._ask, args=(port,), daemon=True)
        self._thread.start()
        return self

    def _ask(self, port: int) -> None:
        while not self._stop.wait(0.05):
            began = time.perf_counter()
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                connection.request("GET", "/hub/api/")
                connection.getresponse().read()
                connection.close()
            except OSError:
                continue
            self.latencies.append(time.perf_counter() - began)

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.to_thread(self._thread.join)
        self._server.close()


async def settle(timeout: float = 300) -> float:
    """Seconds until the cluster has caught up with the stops: every ResourceQuota (kubelab's
    users' have them; KubeSpawner's have none) counts no pods. Users come back the next day,
    so the returning storm should time their spawns, not the stops' aftermath."""
    from kubernetes_asyncio import client, config

    began = time.perf_counter()
    api_client = await config.new_client_from_config(str(KUBECONFIG))
    try:
        core = client.CoreV1Api(api_client)
        while time.perf_counter() - began < timeout:
            quotas: Any = await core.list_resource_quota_for_all_namespaces(_preload_content=False)
            items = json.loads(await quotas.read())["items"]
            if all(((q.get("status") or {}).get("used") or {}).get("pods", "0") == "0" for q in items):
                break
            await asyncio.sleep(0.5)
    finally:
        await api_client.close()
    return time.perf_counter() - began


def process_cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds (user + system) each process has used so far, by name, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    used = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        used[name] = (int(fields[11]) + int(fields[12])) / ticks
    return used


async def plane_cores(plane: dict[str, int], window: float) -> float:
    """Cores the control plane's processes use together, averaged over `window` seconds."""
    before = sum(process_cpu(plane).values())
    await asyncio.sleep(window)
    return (sum(process_cpu(plane).values()) - before) / window


async def quiet(plane: dict[str, int], idle: float, timeout: float = 180) -> float:
    """Seconds until the control plane is back to its `idle` use (within 0.05 cores, over 3 s):
    what one storm left the cluster to do (the quota controller's first count of each new
    namespace, the claim binder's resync) is not charged to the next storm, whichever side."""
    began = time.perf_counter()
    while time.perf_counter() - began < timeout and await plane_cores(plane, 3) > idle + 0.05:
        pass
    return time.perf_counter() - began


async def storm_phase(
    spawners: list[Any], options: dict[str, Any], plane: dict[str, int], idle: float
) -> dict[str, Any]:
    """`spawners` started at once once the cluster is `quiet`, then all stopped and the cluster
    let catch up (`settle`).
    CPU per spawn, which a loaded machine stretches less than wall time: the hub's (this
    process: its event loop, and the loopback provisioner's thread) and each control-plane
    process's, over the storm itself (not the stops)."""

    async def one(spawner: Any) -> tuple[float, str | None]:
        spawner.user_options = dict(options)
        began = time.perf_counter()
        try:
            await start_retrying(spawner, within=STORM_PATIENCE)
        except Exception as exc:
            return time.perf_counter() - began, f"{type(exc).__name__}: {exc}"[:200]
        return time.perf_counter() - began, None

    quieted = await quiet(plane, idle)
    FAILED_STARTS.clear()
    load_before = os.getloadavg()[0]
    plane_before, hub_before = process_cpu(plane), time.process_time()
    async with LoopProbe() as probe:
        began = time.perf_counter()
        outcomes = await asyncio.gather(*(one(s) for s in spawners))
        total = time.perf_counter() - began
    hub_cpu, plane_after = time.process_time() - hub_before, process_cpu(plane)
    await asyncio.gather(*(s.stop(now=True) for s in spawners))
    settled = await settle()
    starts = [elapsed for elapsed, _ in outcomes]
    failures = [error for _, error in outcomes if error]
    per_spawn = 1000 / len(spawners)
    return {
        "failures": len(failures),
        "failed_attempts_retried": sum(FAILED_STARTS.values()),
        "p50_s": percentile(starts, 0.5),
        "p95_s": percentile(starts, 0.95),
        "total_s": total,
        "hub_api_p95_s": percentile(probe.latencies, 0.95),
        "hub_cpu_ms_per_spawn": round(hub_cpu * per_spawn, 1),
        "control_plane_cpu_ms_per_spawn": {
            name: round((plane_after[name] - plane_before[name]) * per_spawn, 1)
            for name in plane_after
            if name in plane_before
        },
        "load_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "settled_after_stop_s": settled,
        "control_plane_quiet_before_s": round(quieted, 1),
        **({"first_failure": failures[0]} if failures else {}),
    }


async def bench(rounds: int, users: int, api_port: int, plane: dict[str, int]) -> list[dict[str, Any]]:
    from kubernetes_asyncio import client, config
    from kubespawner import KubeSpawner

    from kubelab.spawner import KubeLabSpawner

    plain_config, storage_config, lab_config = configs(api_port)
    results = []
    idle = await plane_cores(plane, 5)  # the cluster's own heartbeats, before any spawn
    # -- one start on a quiet cluster, alternating so drift hits all alike -------------------
    plain_times, storage_times, lab_times, back_times = [], [], [], []
    for i in range(rounds):
        plain_times.append(await timed_start(make(KubeSpawner, f"plain{i}", plain_config), {}))
        storage_times.append(await timed_start(make(KubeSpawner, f"pvc{i}", storage_config), {}))
        lab_times.append(await timed_start(make(KubeLabSpawner, f"lab{i}", lab_config), {"gpus": "1(T4)"}))
        back_times.append(await timed_start(make(KubeLabSpawner, f"lab{i}", lab_config), {"gpus": "1(T4)"}))
    med = {
        k: statistics.median(v)
        for k, v in (("plain", plain_times), ("pvc", storage_times), ("lab", lab_times), ("back", back_times))
    }
    results.append(
        {
            "bench": "spawner_start",
            "rounds": rounds,
            "failed_starts_retried": dict(FAILED_STARTS),
            "kubespawner_median_s": med["plain"],
            "kubespawner_with_home_pvc_median_s": med["pvc"],
            "kubelabspawner_median_s": med["lab"],
            "kubelabspawner_returning_median_s": med["back"],
            "ratio": med["lab"] / med["plain"],
            "ratio_vs_home_pvc": med["lab"] / med["pvc"],
            "ratio_returning_vs_home_pvc": med["back"] / med["pvc"],
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

    # -- a storm: every user at once, fresh then returning -----------------------------------
    # kubernetes_asyncio pools 5 connections per CPU; with KubeSpawner's default 3 s request
    # timeout, a storm's requests time out waiting for a connection (for plain KubeSpawner
    # too), so both get the timeouts the shipped hub configuration sets (a pod that takes
    # over KubeSpawner's default 60 s to run while hundreds of claims bind is not a failure).
    for cfg in (plain_config, storage_config, lab_config):
        side = cfg[next(iter(cfg))]
        side.k8s_api_request_timeout, side.k8s_api_request_retry_timeout = 30, 120
        side.start_timeout = 600
    # Each phase runs for both spawners back to back (fresh, fresh, returning, returning), so
    # the two sides of a ratio meet the same load and a cluster holding the same objects.
    sides = {
        "kubespawner_with_home_pvc": (
            [make(KubeSpawner, f"vcrowd{i}", storage_config) for i in range(users)],
            {},
        ),
        "kubelabspawner": (
            [make(KubeLabSpawner, f"crowd{i}", lab_config) for i in range(users)],
            {"gpus": "1(T4)"},
        ),
    }
    line: dict[str, Any] = {"bench": "spawn_storm", "users": users, "plane_idle_cores": round(idle, 3)}
    for phase in ("fresh", "returning"):
        for name, (spawners, options) in sides.items():
            line[f"{name}_{phase}"] = await storm_phase(spawners, options, plane, idle)
        kube, kubelab = line[f"kubespawner_with_home_pvc_{phase}"], line[f"kubelabspawner_{phase}"]
        line[f"ratio_{phase}_p95"] = kubelab["p95_s"] / kube["p95_s"]
        line[f"ratio_{phase}_total"] = kubelab["total_s"] / kube["total_s"]
        line[f"ratio_{phase}_hub_cpu"] = kubelab["hub_cpu_ms_per_spawn"] / kube["hub_cpu_ms_per_spawn"]
    results.append(line)
    await KubeLabSpawner.stop_watches()
    await KubeSpawner._stop_all_reflectors()
    return results


async def count_requests(proxy: Any, api_port: int) -> dict[str, Any]:
    """Requests of one spawn (start() to a Running pod) on a hub that already watches, first and
    returning, by KubeLabSpawner and KubeSpawner with a home claim, as the proxy saw them."""
    from kubespawner import KubeSpawner

    from kubelab.spawner import KubeLabSpawner

    _, storage_config, lab_config = configs(api_port)
    line: dict[str, Any] = {"bench": "api_requests_per_spawn"}
    for name, cls, cfg, options in (
        ("kubelabspawner", KubeLabSpawner, lab_config, {"gpus": "1(T4)"}),
        ("kubespawner_with_home_pvc", KubeSpawner, storage_config, {}),
    ):
        await timed_start(make(cls, f"{name[:4]}warm", cfg), options)  # the hub's watches start
        for phase in ("first", "returning"):
            spawner = make(cls, f"{name[:4]}count", cfg)
            spawner.user_options = dict(options)
            proxy.forget()
            await start_retrying(spawner)
            seen = proxy.seen()
            await spawner.stop(now=True)
            line[f"{name}_{phase}"] = len(seen)
            line[f"{name}_{phase}_writes"] = sum(
                r.verb in ("create", "patch", "update", "delete") for r in seen
            )
    line["ratio_first"] = line["kubelabspawner_first"] / line["kubespawner_with_home_pvc_first"]
    line["ratio_returning"] = line["kubelabspawner_returning"] / line["kubespawner_with_home_pvc_returning"]
    await KubeLabSpawner.stop_watches()
    await KubeSpawner._stop_all_reflectors()
    return line


def proxied_kubeconfig(plane: ControlPlane, proxy: Any) -> Path:
    """An admin's token (a ServiceAccount bound to cluster-admin) through the counting proxy:
    the proxy forwards bearer tokens, not client certificates."""
    plane.request("POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "bench-hub"}})
    binding = {
        "metadata": {"name": "bench-hub"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench-hub", "namespace": "default"}],
    }
    plane.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    token = plane.token_for("default", "bench-hub")
    return plane.write_kubeconfig(KUBECONFIG.parent / "proxied", token=token, server=proxy.url)


def use_kubeconfig(path: Path) -> None:
    """KubeSpawner loads the default kubeconfig once per process: point it at `path`."""
    from kubernetes_asyncio.config import kube_config
    from kubespawner.clients import load_config

    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(path)
    load_config.cache_clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="quiet single spawns (median)")
    parser.add_argument("--users", type=int, default=50, help="users spawning at once")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)

    def machine(when: str) -> None:  # the load the numbers were taken under (`uptime`'s)
        load = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps({"bench": "machine", "when": when, "cpus": os.cpu_count(), "load_1_5_15min": load}))

    machine("start")
    try:
        with ControlPlane(KUBECONFIG.parent / "cluster", nodes=nodes(args.users)) as plane:
            shutil.copy(plane.kubeconfig, KUBECONFIG)
            pids = {name: process.pid for name, process in plane.processes.items()}
            for line in asyncio.run(bench(args.rounds, args.users, plane.port, pids)):
                print(json.dumps(line), flush=True)
            proxy = plane.fault_proxy()
            try:
                use_kubeconfig(proxied_kubeconfig(plane, proxy))
                print(json.dumps(asyncio.run(count_requests(proxy, plane.port))), flush=True)
            finally:
                proxy.close()
    finally:
        shutil.rmtree(KUBECONFIG.parent, ignore_errors=True)
    machine("end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
