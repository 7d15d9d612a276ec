"""metrics-server on the loopback control plane: the resource metrics API (`metrics.k8s.io`)
served the way a cluster serves it, through the API server's aggregation layer.

metrics-server (built from its Go module, tests/controlplane/build.py) scrapes KWOK's
simulated kubelets (`cluster/kwok/metrics.yaml`: what each pod uses, from its annotations) and
is registered as the `v1beta1.metrics.k8s.io` APIService. The API server reaches it as
`front-proxy-client` and passes the caller's identity in request headers; metrics-server asks
the API server (a SubjectAccessReview) whether that caller may read the pods' metrics, so RBAC
on `pods.metrics.k8s.io` is enforced as on a real cluster.

The APIService's Service is an `ExternalName` one naming `localhost`: the API server resolves
such a Service to its name (`--enable-aggregator-routing` would route to the Service's
endpoints instead, and endpoints may not be loopback addresses). metrics-server's serving
certificate is issued for the name the API server checks (`metrics-server.kube-system.svc`).

Started only by the tests that ask for it (`metrics_cluster`, tests/controlplane/fixtures.py)
and removed after them: the other tests see a cluster with no metrics API.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

from .build import ensure_metrics_server
from .cluster import ControlPlane, free_port

NAME = "metrics-server"
NAMESPACE = "kube-system"
USER = "system:kubelab-metrics-server"
API_SERVICE = "v1beta1.metrics.k8s.io"
RESOLUTION_S = 10  # metrics-server's smallest `--metric-resolution`; a pod's first metrics need two scrapes
_RBAC = "/apis/rbac.authorization.k8s.io/v1"


def _objects(port: int, ca_bundle: str) -> list[tuple[dict[str, Any], str]]:
    """What a metrics-server install creates, each with its collection's path: the rights it
    needs (read pods and nodes, scrape `nodes/metrics`, delegate authentication and
    authorization to the API server), its Service and its APIService."""
    reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kubelab-metrics-server"},
        "rules": [
            {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get", "list", "watch"]},
        ],
    }
    user = [{"kind": "User", "name": USER, "apiGroup": "rbac.authorization.k8s.io"}]

    def binding(kind: str, name: str, role_kind: str, role: str) -> dict[str, Any]:
        metadata = {"name": name} | ({"namespace": NAMESPACE} if kind == "RoleBinding" else {})
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": kind,
            "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": user,
        }

    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {"type": "ExternalName", "externalName": "localhost", "ports": [{"port": port}]},
    }
    api_service = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "service": {"name": NAME, "namespace": NAMESPACE, "port": port},
            "caBundle": ca_bundle,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    return [
        (reader, f"{_RBAC}/clusterroles"),
        (binding("ClusterRoleBinding", "kubelab-metrics-server", "ClusterRole", "kubelab-metrics-server"),
         f"{_RBAC}/clusterrolebindings"),
        (binding("ClusterRoleBinding", "kubelab-metrics-server:auth-delegator", "ClusterRole",
                 "system:auth-delegator"), f"{_RBAC}/clusterrolebindings"),
        (binding("RoleBinding", "kubelab-metrics-server-auth-reader", "Role",
                 "extension-apiserver-authentication-reader"),
         f"{_RBAC}/namespaces/{NAMESPACE}/rolebindings"),
        (service, f"/api/v1/namespaces/{NAMESPACE}/services"),
        (api_service, "/apis/apiregistration.k8s.io/v1/apiservices"),
    ]  # fmt: skip


@contextlib.contextmanager
def running(plane: ControlPlane, timeout: float = 90) -> Iterator[None]:
    """metrics-server serving `metrics.k8s.io` until the block ends; then the APIService, its
    objects and the process are gone and the API is no longer served."""
    binary = ensure_metrics_server()
    deadline = time.monotonic() + timeout
    authority = plane._authority  # the cluster's CA: it signs KWOK's kubelet certificate too
    serving = authority.issue(
        NAME,
        NAME,
        server=True,
        hosts=(f"{NAME}.{NAMESPACE}.svc", "localhost", "127.0.0.1"),
    )
    kubeconfig = plane.write_kubeconfig(
        plane.workdir / f"{NAME}.kubeconfig", cert=authority.issue(f"{NAME}-client", USER), user=USER
    )
    port = free_port()
    objects = _objects(port, base64.b64encode(plane.ca.read_bytes()).decode())
    for document, path in objects:
        plane.apply(document, path)
    plane._spawn(
        NAME,
        [
            str(binary),
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--tls-cert-file={serving.cert}",
            f"--tls-private-key-file={serving.key}",
            f"--cert-dir={plane.workdir / 'metrics-server-certs'}",
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            # KWOK's kubelets: 127.0.0.1 on the port each node reports, with KWOK's certificate
            "--kubelet-preferred-address-types=InternalIP",
            "--kubelet-use-node-status-port",
            f"--kubelet-certificate-authority={plane.ca}",
            f"--metric-resolution={RESOLUTION_S}s",
            "--kubelet-request-timeout=5s",  # under the resolution, as metrics-server requires
            "--v=1",
        ],
    )
    try:
        _wait_served(plane, deadline)
        yield
    finally:
        for document, path in reversed(objects):
            with contextlib.suppress(urllib.error.HTTPError):
                plane.request("DELETE", f"{path}/{document['metadata']['name']}")
        process = plane.processes.pop(NAME, None)
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        _wait_gone(plane, time.monotonic() + 30)


def _wait_served(plane: ControlPlane, deadline: float) -> None:
    """Until the APIService is Available and answers a list of node metrics."""
    last: Exception | None = None
    while time.monotonic() < deadline:
        plane._check_alive(NAME)
        try:
            plane.request("GET", "/apis/metrics.k8s.io/v1beta1/nodes")
            return
        except urllib.error.HTTPError as error:
            last = error
        time.sleep(0.2)
    raise TimeoutError(f"metrics.k8s.io was not served: {last}\n{plane.log_tail(NAME)}")


def _wait_gone(plane: ControlPlane, deadline: float) -> None:
    """Until the API server no longer lists the group (its discovery forgets the APIService)."""
    while time.monotonic() < deadline:
        try:
            plane.request("GET", "/apis/metrics.k8s.io/v1beta1")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return
        time.sleep(0.2)
    raise TimeoutError("metrics.k8s.io was still served after metrics-server was removed")
