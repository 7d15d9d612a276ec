"""Model serving: a scikit-learn model answered directly by its model server and through
Jupyter's proxy (`/kubelab/services/<id>/`), in one run, and how soon `kubelab serve` answers.

Starts a real Jupyter server with kubelab on a free port and `kubelab serve` (MLServer over
the Open Inference Protocol v2) for an iris classifier. Prints JSON lines:

- `serving_latency`: p50/p99 milliseconds of sequential predictions, direct to the replica's
  port and through the proxy, each on one kept-alive connection, beside the p50 of a bare
  authenticated Jupyter call (`GET /api/status`: what the server costs any request). Target:
  the proxy adds at most 2 ms at p50.
- `serving_throughput`: predictions per second with `--clients` concurrent clients, direct and
  through the proxy. Target: the proxy keeps at least 80% of the direct throughput. Beside it,
  the CPU milliseconds each process spent per request (the benchmark's clients, the Jupyter
  server, the model server; and the server's per request for a bare authenticated
  `GET /api/status` under the same load), the machine's load, and `cpu_bound_ratio`: the
  direct path's CPU per prediction over the proxied one's, the ratio to expect where the three
  processes share cores that are all busy.
- `serving_ready`: seconds `kubelab serve` took to return (it waits until the service answers)
  and from its return to the first prediction through the proxy. Target: answering within 3 s
  of `kubelab serve` returning.

Run: `python benchmarks/bench_serving.py [--requests 500] [--clients 8] [--seconds 5]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def emit(**data: object) -> None:
    print(json.dumps(data), flush=True)


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def latencies(url: str, body: dict[str, Any] | None, headers: dict[str, str], count: int) -> list[float]:
    """Milliseconds per prediction (a GET without a body), one after another on one session
    (after a few warm-ups)."""
    session = requests.Session()
    samples = []
    for index in range(count + 10):
        start = time.perf_counter()
        if body is None:
            answer = session.get(url, headers=headers, timeout=30)
        else:
            answer = session.post(url, json=body, headers=headers, timeout=30)
        elapsed = (time.perf_counter() - start) * 1000
        if answer.status_code != 200:
            raise RuntimeError(f"{url}: {answer.status_code} {answer.text[:300]}")
        if index >= 10:
            samples.append(elapsed)
    return samples


def throughput(
    url: str, body: dict[str, Any] | None, headers: dict[str, str], clients: int, seconds: float
) -> float:
    """Predictions (a GET without a body) per second from `clients` threads, each on its own
    session, for `seconds`."""
    counts = [0] * clients
    deadline = time.perf_counter() + seconds

    def client(index: int) -> None:
        session = requests.Session()
        while time.perf_counter() < deadline:
            if body is None:
                answer = session.get(url, headers=headers, timeout=30)
            else:
                answer = session.post(url, json=body, headers=headers, timeout=30)
            if answer.status_code == 200:
                counts[index] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - start)


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def loaded(
    args: argparse.Namespace,
    url: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    processes: dict[str, psutil.Process],
) -> tuple[float, dict[str, float]]:
    """Requests per second under load, and the CPU milliseconds per request of each process."""
    before = {name: cpu_seconds(process) for name, process in processes.items()}
    start = time.perf_counter()
    rate = throughput(url, body, headers, args.clients, args.seconds)
    count = max(rate * (time.perf_counter() - start), 1.0)
    after = {name: cpu_seconds(process) for name, process in processes.items()}
    return rate, {name: round((after[name] - before[name]) * 1000 / count, 3) for name in processes}


def main() -> None:
    from jupyter_server_process import JupyterServer
    from serving_support import infer_body, write_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="sequential predictions per path")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients for throughput")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of load per path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubelab-bench-serving-") as scratch:
        tmp = Path(scratch)
        root, home = tmp / "root", tmp / "home"
        root.mkdir()
        write_model(root)
        env = {"KUBELAB_MACHINE_DIR": str(tmp / "machine")}
        with JupyterServer(root, home, env=env) as server:
            cli_env = {**os.environ, "KUBELAB_HOME": str(home), **env}
            cli_env.pop("KUBELAB_API_URL", None)
            started = time.perf_counter()
            serve = [sys.executable, "-m", "kubelab.cli", "serve", "--name", "bench", "--model"]
            done = subprocess.run(
                [*serve, "outputs/model.joblib", "-o", "json"],
                cwd=root,
                env=cli_env,
                capture_output=True,
                text=True,
            )
            returned = time.perf_counter()
            if done.returncode != 0:
                raise SystemExit(f"kubelab serve failed: {done.stderr or done.stdout}")
            view = json.loads(done.stdout)
            body = infer_body()
            proxied = server.url + view["url"].lstrip("/") + view["endpoint"]
            while requests.post(proxied, json=body, headers=server.headers, timeout=30).status_code != 200:
                time.sleep(0.01)
            first_answer = time.perf_counter()
            direct = f"http://127.0.0.1:{view['replicas'][0]['port']}/{view['endpoint']}"
            try:
                status = server.url + "api/status"
                floor = latencies(status, None, server.headers, args.requests)
                assert server.process is not None
                jupyter = psutil.Process(server.process.pid)
                model = psutil.Process(view["replicas"][0]["pid"])
                processes = {"client": psutil.Process(), "jupyter": jupyter, "model": model}
                floor_p50 = statistics.median(floor)
                measure(args, direct, proxied, body, server.headers, status, floor_p50, processes)
            finally:
                server.post(f"services/{view['id']}/stop")
            emit(
                bench="serving_ready",
                serve_seconds=round(returned - started, 3),
                answer_after_return_seconds=round(first_answer - returned, 3),
                ratio_answer_after_return_to_target=round((first_answer - returned) / 3.0, 3),
                target_seconds=3.0,
            )


def measure(
    args: argparse.Namespace,
    direct: str,
    proxied: str,
    body: dict[str, Any],
    auth: dict[str, str],
    status: str,
    jupyter_p50: float,
    processes: dict[str, psutil.Process],
) -> None:
    """`jupyter_p50`: an authenticated Jupyter API call's own p50 (`GET /api/status`), the
    floor of anything served through the server, measured beside."""
    own = latencies(direct, body, {}, args.requests)
    through = latencies(proxied, body, auth, args.requests)
    p50, p50_proxy = statistics.median(own), statistics.median(through)
    emit(
        bench="serving_latency",
        requests=args.requests,
        direct_p50_ms=round(p50, 3),
        direct_p99_ms=round(percentile(own, 0.99), 3),
        proxy_p50_ms=round(p50_proxy, 3),
        proxy_p99_ms=round(percentile(through, 0.99), 3),
        added_p50_ms=round(p50_proxy - p50, 3),
        ratio_p50=round(p50_proxy / p50, 2),
        jupyter_api_p50_ms=round(jupyter_p50, 3),
        target_added_p50_ms=2.0,
    )
    load = os.getloadavg()[0]
    direct_only = {name: processes[name] for name in ("client", "model")}
    own_rate, own_cpu = loaded(args, direct, body, {}, direct_only)
    proxy_rate, proxy_cpu = loaded(args, proxied, body, auth, processes)
    _, status_cpu = loaded(args, status, None, auth, {"jupyter": processes["jupyter"]})
    emit(
        bench="serving_throughput",
        clients=args.clients,
        direct_rps=round(own_rate, 1),
        proxy_rps=round(proxy_rate, 1),
        ratio=round(proxy_rate / own_rate, 3),
        target_ratio=0.8,
        direct_cpu_ms_per_request=own_cpu,
        proxy_cpu_ms_per_request=proxy_cpu,
        jupyter_api_status_cpu_ms_per_request=status_cpu["jupyter"],
        cpu_bound_ratio=round(sum(own_cpu.values()) / sum(proxy_cpu.values()), 3),
        load_1m=round(load, 2),
    )


if __name__ == "__main__":
    main()
