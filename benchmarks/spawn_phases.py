"""Where a fresh spawn's time goes in a storm: phase timestamps per spawn, for KubeLabSpawner and
KubeSpawner with a home claim, `--users` fresh users of each at once on one hub loop (the storm
of `bench_spawner.py`, each side on a control plane back to its idle CPU use).

The timestamps come from the spawners' own steps, wrapped here (nothing else changes):
KubeLabSpawner's namespace read, its turn in the hub's spawn queue, the namespace's apply, the
other objects, the bundle hash, the claim's bind wait and each pod create; KubeSpawner's
namespace, claim and pod creates. Each phase prints its median and p95 over the storm's spawns,
in seconds, with each bundle request's time and, from a watch of ResourceQuotas, how many
kubelab pods were made or ran before their namespace's quota was first counted (until then
the quota admission checks nothing there). `--sides` lists the storms in order: `kube`, `lab`
(as configured), `labwait` (waiting for the claim's bind up to 600 s); `--concurrency` sets
`spawn_concurrency`. Run: `python benchmarks/spawn_phases.py [--users 100] [--sides kube,lab]`.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_spawner as bench  # sets KUBECONFIG before the client's import
from controlplane.cluster import ControlPlane

REQUESTS: dict[str, list[float]] = {}  # "METHOD plural" -> each request's seconds
MARKS: dict[str, dict[str, float]] = {}  # namespace -> phase -> seconds since the storm began
BEGAN = [0.0]


def mark(namespace: str, phase: str, first: bool = False) -> None:
    """Record `phase` for `namespace` (the latest, or with `first` the earliest, time)."""
    marks = MARKS.setdefault(namespace, {})
    if first and phase in marks:
        return
    marks[phase] = time.perf_counter() - BEGAN[0]


def wrap(owner: Any, name: str, before: Callable[..., None] | None, after: Callable[..., None]) -> None:
    original = getattr(owner, name)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            before(*args, **kwargs)
        try:
            return await original(*args, **kwargs)
        finally:
            after(*args, **kwargs)

    setattr(owner, name, wrapped)


def instrument() -> None:
    from kubespawner import KubeSpawner

    from kubelab.spawner import apply, kube, storage_layout

    def ns_of(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return str(meta.get("namespace") or meta["name"])

    request = apply.Applier.request

    async def timed(self: Any, method: str, url: str, *a: Any, **k: Any) -> Any:
        parts = url.split("?")[0].split("/")
        plural = parts[-1] if method == "POST" or parts[-2] in ("v1",) else parts[-2]
        began = time.perf_counter()
        try:
            return await request(self, method, url, *a, **k)
        finally:
            REQUESTS.setdefault(f"{method} {plural}", []).append(time.perf_counter() - began)

    setattr(apply.Applier, "request", timed)  # noqa: B010 - a method, replaced
    wrap(storage_layout, "find", None, lambda applier, name, known: mark(name, "lab_ns_read"))
    wrap(
        apply.Applier,
        "reconcile_namespace",
        lambda self, namespace, *a, **k: mark(namespace, "lab_turn"),
        lambda self, namespace, *a, **k: mark(namespace, "lab_hash_applied"),
    )

    def applied(self: Any, obj: dict[str, Any], *a: Any, **k: Any) -> None:
        if obj["kind"] == "Namespace":
            mark(ns_of(obj), "lab_namespace_applied", first=True)
        else:
            mark(ns_of(obj), "lab_objects_applied")

    wrap(apply.Applier, "apply", None, applied)
    wrap(apply.Applier, "create_if_missing", None, lambda self, obj: mark(ns_of(obj), "lab_claim_created"))
    wrap(
        kube,
        "wait_bound",
        lambda client, namespace, *a: mark(namespace, "lab_bind_wait_began"),
        lambda client, namespace, *a: mark(namespace, "lab_claim_bound"),
    )
    wrap(
        KubeSpawner,
        "_ensure_namespace",
        None,
        lambda self: mark(self.namespace, "kube_namespace_made") if type(self) is KubeSpawner else None,
    )
    wrap(
        KubeSpawner,
        "_make_create_pvc_request",
        None,
        lambda self, *a: mark(self.namespace, "kube_claim_created"),
    )

    def pod_before(self: Any, *a: Any) -> None:
        mark(self.namespace, "pod_create_began", first=True)
        MARKS[self.namespace]["pod_creates"] = MARKS[self.namespace].get("pod_creates", 0) + 1

    created = lambda self, *a: mark(self.namespace, "pod_created")  # noqa: E731
    wrap(KubeSpawner, "_make_create_pod_request", pod_before, created)


ORDER = {
    "kubelab": (
        "lab_ns_read",
        "lab_turn",
        "lab_namespace_applied",
        "lab_claim_created",
        "lab_objects_applied",
        "lab_hash_applied",
        "lab_bind_wait_began",
        "lab_claim_bound",
        "pod_create_began",
        "pod_created",
        "running",
    ),
    "kubespawner": (
        *("kube_namespace_made", "kube_claim_created"),
        *("pod_create_began", "pod_created", "running"),
    ),
}


def summary(side: str, spawns: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per phase, the median and p95 of the time since the previous phase, and of the time
    since the storm began, over the spawns."""
    line: dict[str, Any] = {}
    for i, phase in enumerate(ORDER[side]):
        since = [m[phase] - (m[ORDER[side][i - 1]] if i else 0.0) for m in spawns.values() if phase in m]
        at = [m[phase] for m in spawns.values() if phase in m]
        if since:
            line[phase] = {
                "step_p50": round(statistics.median(since), 3),
                "step_p95": round(bench.percentile(since, 0.95), 3),
                "at_p50": round(statistics.median(at), 2),
                "at_p95": round(bench.percentile(at, 0.95), 2),
                "n": len(since),
            }
    creates = [m.get("pod_creates", 0) for m in spawns.values()]
    line["pod_create_attempts_max"] = max(creates, default=0)
    return line


async def quotas_counted() -> None:
    """Marks `quota_counted` when a namespace's ResourceQuota first has a status (its
    controller's first count): until then the quota admission checks nothing in the namespace."""
    from kubernetes_asyncio import client, config, watch

    api_client = await config.new_client_from_config(str(bench.KUBECONFIG))
    try:
        core = client.CoreV1Api(api_client)
        listed: Any = await core.list_resource_quota_for_all_namespaces(_preload_content=False)
        body = json.loads(await listed.read())
        version = body["metadata"]["resourceVersion"]
        async with watch.Watch().stream(
            core.list_resource_quota_for_all_namespaces, resource_version=version, _preload_content=False
        ) as events:
            async for event in events:
                quota = event["raw_object"]
                if (quota.get("status") or {}).get("hard"):
                    mark(quota["metadata"]["namespace"], "quota_counted", first=True)
    finally:
        await api_client.close()


def quota_window(spawns: dict[str, dict[str, float]]) -> dict[str, Any]:
    """How many pods were made, and how many ran, before their namespace's quota was counted."""
    made = [m for m in spawns.values() if "pod_created" in m and "lab_hash_applied" in m]
    late = [m.get("quota_counted", float("inf")) - m["pod_created"] for m in made]
    return {
        "pods_made_before_quota_counted": sum(d > 0 for d in late),
        "pods_running_before_quota_counted": sum(
            m.get("quota_counted", float("inf")) > m["running"] for m in made if "running" in m
        ),
        "quota_counted_after_pod_made_p50_p95_s": [
            round(statistics.median(late), 2) if late else None,
            round(bench.percentile(late, 0.95), 2) if late else None,
        ],
        "pods": len(made),
    }


async def storm(
    side: str, spawners: list[Any], options: dict[str, Any], plane: dict[str, int], idle: float
) -> dict[str, Any]:
    await bench.quiet(plane, idle)
    MARKS.clear()
    REQUESTS.clear()
    bench.FAILED_STARTS.clear()

    async def one(spawner: Any) -> str | None:
        spawner.user_options = dict(options)
        try:
            await bench.start_retrying(spawner, within=bench.STORM_PATIENCE)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"[:200]
        finally:
            mark(spawner.namespace, "running")
        return None

    load = os.getloadavg()[0]
    plane_before, hub_before = bench.process_cpu(plane), time.process_time()
    BEGAN[0] = time.perf_counter()
    counted = asyncio.ensure_future(quotas_counted())
    errors = await asyncio.gather(*(one(s) for s in spawners))
    total = time.perf_counter() - BEGAN[0]
    await asyncio.sleep(2)  # the last quotas' first counts
    counted.cancel()
    hub_cpu, plane_after = time.process_time() - hub_before, bench.process_cpu(plane)
    spawns = {s.namespace: dict(MARKS.get(s.namespace, {})) for s in spawners}
    await asyncio.gather(*(s.stop(now=True) for s in spawners))
    await bench.settle()
    per = 1000 / len(spawners)
    return {
        "bench": "spawn_phases",
        "side": side,
        "users": len(spawners),
        "failures": sum(e is not None for e in errors),
        "failed_attempts_retried": sum(bench.FAILED_STARTS.values()),
        "total_s": round(total, 2),
        "load_1min": [round(load, 2), round(os.getloadavg()[0], 2)],
        "hub_cpu_ms_per_spawn": round(hub_cpu * per, 1),
        "plane_cpu_ms_per_spawn": {
            k: round((plane_after[k] - plane_before[k]) * per, 1) for k in plane_after if k in plane_before
        },
        **summary(side, spawns),
        **(quota_window(spawns) if side == "kubelab" else {}),
        "requests_p50_p95_s": {
            k: [round(statistics.median(v), 3), round(bench.percentile(v, 0.95), 3), len(v)]
            for k, v in sorted(REQUESTS.items())
        },
    }


async def run(
    users: int, sides: list[str], prefix: str, api_port: int, plane: dict[str, int], concurrency: int | None
) -> None:
    from kubespawner import KubeSpawner

    from kubelab.spawner import KubeLabSpawner

    _, storage_config, lab_config = bench.configs(api_port)
    for cfg in (storage_config, lab_config):
        side_cfg = cfg[next(iter(cfg))]
        side_cfg.k8s_api_request_timeout, side_cfg.k8s_api_request_retry_timeout = 30, 120
        side_cfg.start_timeout = 600
    if concurrency:
        lab_config.KubeLabSpawner.spawn_concurrency = concurrency
    idle = await bench.plane_cores(plane, 5)
    # the hub's watches, started as a hub's first spawn or page view starts them
    await bench.timed_start(bench.make(KubeLabSpawner, "warmlab", lab_config), {"gpus": "1(T4)"})
    await bench.timed_start(bench.make(KubeSpawner, "warmkube", storage_config), {})
    for n, side in enumerate(sides):
        if side == "kube":
            crowd = [bench.make(KubeSpawner, f"{prefix}{n}k{i}", storage_config) for i in range(users)]
            print(json.dumps(await storm("kubespawner", crowd, {}, plane, idle)), flush=True)
        else:  # lab: as configured; labwait: waiting for the claim as long as the spawn may take
            cfg = copy.deepcopy(lab_config)  # merge() would share its sections
            if side == "labwait":
                cfg.KubeLabSpawner.claim_bind_timeout = 600
            crowd = [bench.make(KubeLabSpawner, f"{prefix}{n}l{i}", cfg) for i in range(users)]
            line = await storm("kubelab", crowd, {"gpus": "1(T4)"}, plane, idle)
            print(json.dumps({**line, "side": side}), flush=True)
    await KubeLabSpawner.stop_watches()
    await KubeSpawner._stop_all_reflectors()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=None, help="KubeLabSpawner.spawn_concurrency")
    parser.add_argument("--sides", default="kube,lab", help="storms in this order: kube, lab (repeatable)")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)
    instrument()
    sides = args.sides.split(",")
    try:
        cluster = bench.KUBECONFIG.parent / "cluster"
        with ControlPlane(cluster, nodes=bench.nodes(args.users * 2)) as plane:
            shutil.copy(plane.kubeconfig, bench.KUBECONFIG)
            pids = {name: process.pid for name, process in plane.processes.items()}
            asyncio.run(run(args.users, sides, "u", plane.port, pids, args.concurrency))
    finally:
        shutil.rmtree(bench.KUBECONFIG.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
