"""A cluster service reached through the Jupyter server: a notebook's server whose backend is
Kubernetes forwards `/kubelab/services/<id>/…` to a ready pod of that version, behind its login.

The control plane is real and the version's Deployment runs its pods on KWOK's nodes, which
give every pod the address 127.0.0.1 (tests/controlplane: `--cidr=127.0.0.1/32`); a small HTTP
server on this machine at the spec's port stands for the pods' process (KWOK runs none), so the
request the proxy sends to a pod's address really arrives, and what it carries can be read.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer
from kube_support import IMAGE, PROJECT_LABEL, wait_for

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.experiments import Experiments
from kubelab.serving.cluster import ClusterServices
from kubelab.serving.cluster import services as services_for

pytestmark = pytest.mark.cluster


class Pod(BaseHTTPRequestHandler):
    """What the version's pods would run: answers a v2 inference with what it was sent."""

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Pod.seen.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
        answer = json.dumps({"model_name": "iris", "outputs": [{"name": "predict", "data": [0, 2]}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def pod_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    server = ThreadingHTTPServer(("127.0.0.1", port), Pod)
    Pod.seen.clear()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield port
    server.shutdown()
    server.server_close()


@pytest.fixture
def services(make_backend: Callable[..., KubernetesBackend], home: Path) -> ClusterServices:
    found = services_for(lab=Experiments(home=home, backend=make_backend(start=False), user="alice"))
    assert isinstance(found, ClusterServices)
    return found


@pytest.fixture
def notebook_server(
    notebook_kubeconfig: Path, namespace: str, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[JupyterServer]:
    """The notebook's Jupyter server, with the Kubernetes backend and the notebook's token."""
    env = {
        "KUBELAB_BACKEND": "kubernetes",
        "KUBECONFIG": str(notebook_kubeconfig),
        "KUBELAB_IMAGE": IMAGE,
        "KUBELAB_NODE_SELECTOR": json.dumps({PROJECT_LABEL: namespace}),
        "KUBELAB_MACHINE_DIR": str(tmp_path / "machine"),
    }
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # the kubeconfig, not in-cluster
    with JupyterServer(tmp_path / "root", home, env=env) as server:
        yield server


def test_the_server_forwards_to_a_ready_pod_of_the_version_behind_its_login(
    project_node: Callable[..., str],
    services: ClusterServices,
    notebook_server: JupyterServer,
    pod_port: int,
    namespace: str,
) -> None:
    project_node(cpu="8", memory="32Gi")
    spec = {
        "kind": "service",
        "name": "iris",
        "image": IMAGE,
        "command": "python -m http.server {{ port }}",
        "ports": [pod_port],
        "resources": {"cpu": "250m", "memory": "128Mi"},
    }
    services.start(spec)
    running = wait_for(
        lambda: (v := notebook_server.get("services/iris-v1").json())["state"] == "Running" and v,
        60,
        "iris-v1 Running, read by the server",
    )
    assert running["url"] == f"http://iris.{namespace}.svc:{pod_port}/"
    assert {r["ip"] for r in running["replicas"]} == {"127.0.0.1"}

    endpoint = notebook_server.url + "kubelab/services/iris-v1/v2/models/iris/infer"
    body = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [5.1, 3.5, 1.4, 0.2]}]}
    answer = requests.post(endpoint + f"?token={notebook_server.token}&trace=1", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["data"] == [0, 2]
    assert "sandbox" in answer.headers["Content-Security-Policy"]
    (arrived,) = Pod.seen
    assert arrived["path"] == "/v2/models/iris/infer?trace=1" and arrived["body"] == body  # no token
    assert "Authorization" not in arrived["headers"] and "Cookie" not in arrived["headers"]

    assert requests.post(endpoint, json=body, timeout=30).status_code == 403  # no login
    page = requests.get(
        notebook_server.url + "kubelab/services/iris-v1/",
        headers={**notebook_server.headers, "Accept": "text/html"},
        allow_redirects=False,
        timeout=30,
    )
    assert page.status_code == 422 and "its pages at http://iris." in page.json()["fields"][0]["reason"]

    # stopped through this server, its proxy forgets the pod at once (elsewhere: within a second)
    assert notebook_server.post("services/iris-v1/stop").json()["state"] == "Stopped"
    gone = requests.post(endpoint, json=body, headers=notebook_server.headers, timeout=30)
    assert gone.status_code == 503 and "iris-v1 is Stopped" in gone.json()["detail"]
    assert len(Pod.seen) == 1
