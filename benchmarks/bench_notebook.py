"""Notebook latencies: `%%train` hand-back and TensorBoard's first page through the proxy.

Starts a real Jupyter server with kubelab on a free port. Prints JSON lines:

- `train_handback`: median seconds for `%%train --detach` to return in an InteractiveShell
  using the REST client (many runs, one shell), beside the baselines measured in the same
  run: an empty line magic (`%pwd`-style no-op) and a bare REST POST of the same spec.
  Target: median under 0.3 s.
- `tensorboard_first_page`: seconds from `POST /kubelab/api/tensorboards` to the first 200
  of the page through the proxy, beside TensorBoard's own bare start (the tensorboard CLI
  to its first 200 on its own port). Target: under 5 s.

Run: `python benchmarks/bench_notebook.py [--runs 15]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

if TYPE_CHECKING:
    from jupyter_server_process import JupyterServer


def emit(**data: object) -> None:
    print(json.dumps(data), flush=True)


def timed(action: Callable[[], object], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return samples


def wait_200(url: str, headers: dict[str, str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(url, headers=headers, timeout=10).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"{url} never answered 200")


def bench_train(server: JupyterServer, runs: int) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    os.environ.update(
        KUBELAB_API_URL=server.api.rstrip("/"), KUBELAB_API_TOKEN=server.token, KUBELAB_WIDGETS="0"
    )
    shell: Any = InteractiveShell.instance()  # IPython leaves run_cell unannotated
    shell.run_cell("%load_ext kubelab")
    cell = "%%train --detach --name bench\nimport time\ntime.sleep(0.1)\n"
    shell.run_cell(cell)  # warm: imports, connection
    noop = timed(lambda: shell.run_cell("%alias_magic -h", silent=True), runs)
    spec = {"name": "bench-post", "code": {"source": "pass\n"}}
    post = timed(lambda: server.post("experiments", spec), runs)
    handback = timed(lambda: shell.run_cell(cell, silent=True), runs)
    median = statistics.median(handback)
    emit(
        bench="train_handback",
        runs=runs,
        median_s=round(median, 4),
        baseline_noop_magic_s=round(statistics.median(noop), 4),
        baseline_rest_post_s=round(statistics.median(post), 4),
        ratio_to_rest_post=round(median / statistics.median(post), 2),
        target_s=0.3,
        within_target=median < 0.3,
    )


def bench_tensorboard(server: JupyterServer, tmp: Path) -> None:
    from kubelab.experiments import Experiments
    from kubelab.tensorboard.supervisor import free_port

    run = Experiments(server.home).submit({"name": "tb-bench", "command": ["true"]})
    start = time.perf_counter()
    session = server.post("tensorboards", {"experiments": [run["id"]]}).json()
    wait_200(server.url + session["url"].lstrip("/"), server.headers)
    proxied = time.perf_counter() - start

    port = free_port()
    start = time.perf_counter()
    bare = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(tmp),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_200(f"http://127.0.0.1:{port}/", {})
        own = time.perf_counter() - start
    finally:
        bare.terminate()
        bare.wait()
    emit(
        bench="tensorboard_first_page",
        proxied_s=round(proxied, 3),
        bare_tensorboard_s=round(own, 3),
        ratio=round(proxied / own, 2),
        target_s=5.0,
        within_target=proxied < 5.0,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    from jupyter_server_process import JupyterServer

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["KUBELAB_MACHINE_DIR"] = str(tmp_path / "machine")
        (tmp_path / "root").mkdir()
        server = JupyterServer(tmp_path / "root", tmp_path / "home").start()
        try:
            bench_train(server, args.runs)
            bench_tensorboard(server, tmp_path)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
