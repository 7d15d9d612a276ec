"""Kubernetes backend benchmarks against the real API server (tests/controlplane: etcd,
kube-apiserver, controller-manager, scheduler, KWOK nodes, all on this machine). One JSON line
per measurement.

- submit_to_job_created: `KubernetesBackend.submit` until the Job exists (target: median at
  most 30 ms); baseline: a bare `BatchV1Api.create_namespaced_job` of the same manifest,
  with the same ServiceAccount credentials.
- status_lag_1000: 1,000 live experiments tracked by one backend. Their pods wait unscheduled
  (a node selector no node has); for a sample of them we bind the pod to a node, KWOK starts it
  as a kubelet would, and we time from the binding until the run's status.json says Running
  (median and p95), and count the watch connections open (at most one per kind). Baseline: a
  bare pod watch in the same namespace, timed from the same binding until it sees Running.

`python benchmarks/bench_kube.py [--live 1000] [--samples 200]`
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "kube"), str(ROOT / "tests")]

from controlplane.cluster import ControlPlane  # noqa: E402
from controlplane.crds import TRAINING_OPERATOR, training_operator_crd  # noqa: E402
from kube_support import role_documents  # noqa: E402
from kubernetes import client, config, watch  # noqa: E402

from kubelab.backends.kubernetes.backend import KubernetesBackend  # noqa: E402
from kubelab.backends.kubernetes.notebook_env import NotebookEnv  # noqa: E402
from kubelab.records import RunDirectory, Status  # noqa: E402
from kubelab.spec import ExperimentSpec  # noqa: E402

# The kubernetes client's annotations name only its models: the calls below that pass dict bodies
# or read unparsed answers (_preload_content=False), as the backend does, ignore that by code.

SPEC = {
    "command": ["python", "train.py"],
    "resources": {"cpu": "100m", "memory": "64Mi"},
    "workdir": "/mnt/alice",
}
NOWHERE = {"bench.kubelab.dev/pool": "none"}  # no node has it: pods wait for a binding
BIND_NODES = ("cpu-0", "cpu-1")


def emit(name: str, samples: list[float], baseline: list[float] | None = None, **extra: Any) -> None:
    ms = sorted(s * 1000 for s in samples)
    line: dict[str, Any] = {
        "bench": name,
        "median_ms": round(statistics.median(ms), 2),
        "n": len(ms),
        "p95_ms": round(ms[max(0, int(len(ms) * 0.95) - 1)], 2),
    }
    if baseline is not None:
        base = sorted(b * 1000 for b in baseline)
        line.update(
            baseline_median_ms=round(statistics.median(base), 2),
            baseline_p95_ms=round(base[max(0, int(len(base) * 0.95) - 1)], 2),
            ratio=round(line["median_ms"] / statistics.median(base), 2),
        )
    line.update(extra)
    print(json.dumps(line), flush=True)


def setup(plane: ControlPlane, tmp: Path, namespace: str) -> Path:
    """A namespace with the notebook's Role; a kubeconfig with its ServiceAccount's token."""
    with config.new_client_from_config(str(plane.kubeconfig)) as admin:
        core = client.CoreV1Api(admin)
        core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "notebook"}})  # type: ignore[arg-type]
        role, binding = role_documents(namespace, "notebook")
        rbac = client.RbacAuthorizationV1Api(admin)
        rbac.create_namespaced_role(namespace, role)  # type: ignore[arg-type]
        rbac.create_namespaced_role_binding(namespace, binding)  # type: ignore[arg-type]
    return plane.write_kubeconfig(
        tmp / f"{namespace}.kubeconfig", token=plane.token_for(namespace, "notebook"), namespace=namespace
    )


def notebook(namespace: str, tmp: Path) -> NotebookEnv:
    return NotebookEnv(
        namespace=namespace,
        image="registry.example.org/nb:1",
        user="alice",
        home=str(tmp),
        node_selector=dict(NOWHERE),
    )


def new_run(root: Path, spec: ExperimentSpec) -> RunDirectory:
    return RunDirectory.create(root, spec.to_dict(), Status(backend="kubernetes", user="alice"))


def bench_submit(plane: ControlPlane, tmp: Path, samples: int) -> None:
    kubeconfig = setup(plane, tmp, "bench-submit")
    backend = KubernetesBackend.from_kubeconfig(
        kubeconfig, notebook("bench-submit", tmp), runs_root=tmp / "runs"
    )
    spec = ExperimentSpec.parse(SPEC)
    with config.new_client_from_config(str(kubeconfig)) as api:
        batch = client.BatchV1Api(api)
        ours, bare = [], []
        for i in range(samples + 10):
            run = new_run(tmp / "runs", spec)
            manifest = backend.render(spec, run.id)[0]
            manifest["metadata"]["name"] = f"bare-{i}"
            start = time.perf_counter()
            batch.create_namespaced_job("bench-submit", manifest)  # type: ignore[arg-type]
            middle = time.perf_counter()
            backend.submit(run, spec)
            end = time.perf_counter()
            if i >= 10:  # warm-up: connection pool, schema validators
                bare.append(middle - start)
                ours.append(end - middle)
    backend.close()
    emit("submit_to_job_created", ours, bare, target_ms=30)


class RunningSeen(threading.Thread):
    """The baseline: a bare pod watch noting when it first sees each pod Running."""

    seen: dict[str, float]

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        super().__init__(daemon=True)
        self.api = config.new_client_from_config(str(kubeconfig))
        self.namespace, self.seen = namespace, {}
        self.ready, self.done = threading.Event(), threading.Event()
        self.changed = threading.Condition()

    def run(self) -> None:
        core, stream = client.CoreV1Api(self.api), watch.Watch()  # type: ignore[no-untyped-call]
        listing = core.list_namespaced_pod(self.namespace, _preload_content=False)
        version = json.loads(listing.data)["metadata"]["resourceVersion"]  # type: ignore[attr-defined]
        self.ready.set()
        while not self.done.is_set():
            for event in stream.stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_pod,
                self.namespace,
                resource_version=version,
                timeout_seconds=5,
                _preload_content=False,
            ):
                pod = event["raw_object"]
                version = pod["metadata"]["resourceVersion"]
                if pod.get("status", {}).get("phase") == "Running":
                    with self.changed:
                        self.seen.setdefault(pod["metadata"]["name"], time.perf_counter())
                        self.changed.notify_all()

    def wait(self, pod: str, timeout: float = 30) -> float:
        with self.changed:
            if not self.changed.wait_for(lambda: pod in self.seen, timeout):
                raise TimeoutError(f"the watch never saw {pod} Running")
            return self.seen[pod]


def bench_lag(plane: ControlPlane, tmp: Path, live: int, samples: int) -> None:
    namespace = "bench-live"
    kubeconfig = setup(plane, tmp, namespace)
    backend = KubernetesBackend.from_kubeconfig(kubeconfig, notebook(namespace, tmp), runs_root=tmp / "live")
    backend.start()
    assert backend.watcher is not None and backend.watcher.wait_synced(30)
    spec = ExperimentSpec.parse(SPEC)
    runs = [new_run(tmp / "live", spec) for _ in range(live)]
    began = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:  # as several notebooks' submits would arrive
        list(pool.map(lambda run: backend.submit(run, spec), runs))
    submitted = time.perf_counter() - began
    admin = config.new_client_from_config(str(plane.kubeconfig))
    core = client.CoreV1Api(admin)
    pods: dict[str, str] = {}
    deadline = time.monotonic() + 600
    while len(pods) < live:  # the Job controller makes the pods; then the scheduler parks them
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(pods)} of {live} pods were created")
        time.sleep(1)
        items = json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)  # type: ignore[attr-defined]
        pods = {
            p["metadata"]["labels"]["kubelab.io/experiment"]: p["metadata"]["name"] for p in items["items"]
        }
    all_pods = time.perf_counter() - began
    time.sleep(5)  # let the scheduler's first pass over the unschedulable pods settle
    baseline = RunningSeen(plane.kubeconfig, namespace)
    baseline.start()
    baseline.ready.wait(30)
    step = max(1, live // samples)
    lags, bare = [], []
    for i, run in enumerate(runs[::step][:samples]):
        pod = pods[run.id]
        start = time.perf_counter()
        core.create_namespaced_pod_binding(
            pod,
            namespace,
            {  # type: ignore[arg-type]  # the client sends a dict body as it is
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod},
                "target": {"apiVersion": "v1", "kind": "Node", "name": BIND_NODES[i % 2]},
            },
            _preload_content=False,
        )
        while run.status().state != "Running":
            time.sleep(0.001)
        lags.append(time.perf_counter() - start)
        bare.append(baseline.wait(pod) - start)
    baseline.done.set()
    emit(
        "status_lag_1000",
        lags,
        bare,
        live_experiments=live,
        submit_all_s=round(submitted, 1),
        all_pods_created_s=round(all_pods, 1),
        watch_connections=backend.watcher.open_watches,
        watched_kinds=backend.watcher.kinds,
    )
    backend.close()
    admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, ControlPlane(Path(folder)) as plane:
        for kind in TRAINING_OPERATOR:  # the CRDs only: kubelab watches every kind served
            plane.install_crd(training_operator_crd(kind))
        tmp = Path(folder)
        bench_submit(plane, tmp, args.samples)
        bench_lag(plane, tmp, args.live, args.samples)


if __name__ == "__main__":
    main()
