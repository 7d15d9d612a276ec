"""Kubernetes backend benchmarks against the test API server. One JSON line per measurement.

- submit_to_job_created: `KubernetesBackend.submit` until the Job exists (target: median at
  most 30 ms); baseline: a bare `BatchV1Api.create_namespaced_job` of the same manifest,
  with the same ServiceAccount credentials.
- status_lag_1000: 1,000 live experiments tracked by one backend; for a sample of them a pod
  turns Running and we time until the run's status.json says so (median and p95), and count
  the watch connections open (at most one per kind).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "kube"), str(ROOT / "tests")]

from conftest import role_documents  # noqa: E402
from kubeapi import KubeApiServer  # noqa: E402
from kubernetes import client, config  # noqa: E402

from kubelab.kube.backend import KubernetesBackend  # noqa: E402
from kubelab.kube.notebook_env import NotebookEnv  # noqa: E402
from kubelab.records import RunDirectory, Status  # noqa: E402
from kubelab.spec import ExperimentSpec  # noqa: E402

SPEC = {"command": ["python", "train.py"], "resources": {"cpu": "100m", "memory": "64Mi"},
        "workdir": "/mnt/alice"}
LIVE = 1000
SAMPLES = 200


def emit(name: str, samples: list[float], baseline: list[float] | None = None, **extra) -> None:
    ms = sorted(s * 1000 for s in samples)
    line = {"name": name, "median_ms": round(statistics.median(ms), 2), "n": len(ms)}
    if baseline is not None:
        base = statistics.median(baseline) * 1000
        line.update(baseline_median_ms=round(base, 2), ratio=round(line["median_ms"] / base, 2))
    line.update(extra)
    print(json.dumps(line), flush=True)


def setup(server: KubeApiServer, tmp: Path, namespace: str) -> Path:
    admin = config.new_client_from_config(str(server.write_kubeconfig(tmp / "admin")))
    client.CoreV1Api(admin).create_namespace({"metadata": {"name": namespace}})
    role, binding = role_documents(namespace, "notebook")
    rbac = client.RbacAuthorizationV1Api(admin)
    rbac.create_namespaced_role(namespace, role)
    rbac.create_namespaced_role_binding(namespace, binding)
    token = server.token_for(namespace, "notebook")
    return server.write_kubeconfig(tmp / "notebook", token=token, namespace=namespace)


def new_run(root: Path, spec: ExperimentSpec) -> RunDirectory:
    return RunDirectory.create(root, spec.to_dict(), Status(backend="kubernetes", user="alice"))


def bench_submit(server: KubeApiServer, tmp: Path) -> None:
    kubeconfig = setup(server, tmp, "bench-submit")
    nb = NotebookEnv(namespace="bench-submit", image="nb:1", user="alice", home=str(tmp))
    backend = KubernetesBackend.from_kubeconfig(kubeconfig, nb, runs_root=tmp / "runs")
    spec = ExperimentSpec.parse(SPEC)
    batch = client.BatchV1Api(config.new_client_from_config(str(kubeconfig)))
    ours, bare = [], []
    for i in range(SAMPLES + 10):
        run = new_run(tmp / "runs", spec)
        manifest = backend.render(spec, run.id)[0]
        manifest["metadata"]["name"] = f"bare-{i}"
        start = time.perf_counter()
        batch.create_namespaced_job("bench-submit", manifest)
        middle = time.perf_counter()
        backend.submit(run, spec)
        end = time.perf_counter()
        if i >= 10:  # warm-up: connection pool, schema validators
            bare.append(middle - start)
            ours.append(end - middle)
    emit("submit_to_job_created", ours, bare, target_ms=30)


def bench_lag(server: KubeApiServer, tmp: Path) -> None:
    namespace = "bench-live"
    kubeconfig = setup(server, tmp, namespace)
    server.add_node("big", cpu="2000", memory="4000Gi", pods=LIVE + 10)
    nb = NotebookEnv(namespace=namespace, image="nb:1", user="alice", home=str(tmp))
    backend = KubernetesBackend.from_kubeconfig(kubeconfig, nb, runs_root=tmp / "live")
    backend.start()
    assert backend.watcher is not None and backend.watcher.wait_synced(30)
    spec = ExperimentSpec.parse(SPEC)
    runs = []
    for _ in range(LIVE):
        run = new_run(tmp / "live", spec)
        backend.submit(run, spec)
        runs.append(run)
    pods = {p["metadata"]["labels"]["kubelab.io/experiment"]: p["metadata"]["name"]
            for p in server.objects("pods", namespace)}
    step = LIVE // SAMPLES
    lags = []
    for run in runs[::step]:
        server.run_pod(namespace, pods[run.id])
        start = time.perf_counter()
        while run.status().state != "Running":
            time.sleep(0.0005)
        lags.append(time.perf_counter() - start)
    ms = sorted(x * 1000 for x in lags)
    emit("status_lag_1000", lags, p95_ms=round(ms[int(len(ms) * 0.95) - 1], 2),
         live_experiments=LIVE, watch_connections=backend.watcher.open_watches,
         watched_kinds=backend.watcher.kinds)
    backend.close()


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, KubeApiServer(extensions=("kubeflow",)) as kube:
        tmp = Path(folder)
        bench_submit(kube, tmp)
        bench_lag(kube, tmp)


if __name__ == "__main__":
    main()
