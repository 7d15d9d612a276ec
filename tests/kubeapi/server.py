"""`KubeApiServer`: the test API server on a loopback port, in background threads."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from .cluster import Cluster
from .control import ClusterControls
from .handler import ApiHandler

_BUILTIN_CLUSTER_ROLES = {
    "cluster-admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                      {"nonResourceURLs": ["*"], "verbs": ["*"]}],
    "edit": [{"apiGroups": ["", "batch", "kubeflow.org", "kueue.x-k8s.io"],
              "resources": ["pods", "pods/log", "pods/status", "services", "configmaps",
                            "secrets", "persistentvolumeclaims", "serviceaccounts", "events",
                            "jobs", "jobs/status", "pytorchjobs", "tfjobs", "localqueues",
                            "workloads"],
              "verbs": ["get", "list", "watch", "create", "update", "patch", "delete",
                        "deletecollection"]}],
    "view": [{"apiGroups": ["", "batch", "kubeflow.org", "kueue.x-k8s.io"],
              "resources": ["pods", "pods/log", "services", "configmaps",
                            "persistentvolumeclaims", "serviceaccounts", "events", "jobs",
                            "pytorchjobs", "tfjobs", "localqueues", "workloads"],
              "verbs": ["get", "list", "watch"]}],
}


class ApiHTTPServer(ThreadingHTTPServer):
    """Threaded HTTP server that remembers its connections so it can cut them on stop."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], kube: KubeApiServer) -> None:
        self.kube = kube
        self.cluster = kube.cluster
        self.stop_event = threading.Event()
        self.bookmark_interval = kube.bookmark_interval
        self.max_watch_seconds = kube.max_watch_seconds
        self._sockets: set[socket.socket] = set()
        self._sockets_lock = threading.Lock()
        super().__init__(address, ApiHandler)
        self.address = f"{self.server_address[0]}:{self.server_address[1]}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._sockets_lock:
            self._sockets.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._sockets_lock:
            self._sockets.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self._sockets_lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class KubeApiServer(ClusterControls):
    """A Kubernetes API server for tests: real HTTP, official-client compatible.

    Use as a context manager (`with KubeApiServer() as kube: ...`). `extensions` enables the
    optional API groups: `"kubeflow"` (kubeflow.org/v1 PyTorchJob, TFJob) and `"kueue"`.
    `history_size` is the watch history window (resuming from older versions gets 410).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 extensions: tuple[str, ...] | list[str] = (), history_size: int = 10_000,
                 bookmark_interval: float = 5.0, max_watch_seconds: float = 1800.0) -> None:
        self.cluster = Cluster(extensions, history_size)
        self.host, self.port = host, port
        self.bookmark_interval = bookmark_interval
        self.max_watch_seconds = max_watch_seconds
        self._httpd: ApiHTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._bootstrap()

    def _bootstrap(self) -> None:
        for ns in ("default", "kube-system", "kube-public"):
            self.cluster.create(self.cluster.rt("namespaces"), "", {"metadata": {"name": ns}})
        roles = self.cluster.rt("clusterroles.rbac.authorization.k8s.io")
        for name, rules in _BUILTIN_CLUSTER_ROLES.items():
            self.cluster.create(roles, "", {"metadata": {"name": name}, "rules": rules})

    # -- lifecycle -----------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> KubeApiServer:
        if self._httpd is not None:
            return self
        self._httpd = ApiHTTPServer((self.host, self.port), self)
        self.port = self._httpd.server_address[1]  # keep the port across stop()/start()
        httpd = self._httpd
        serve = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                 name=f"kubeapi-{self.port}", daemon=True)
        tick = threading.Thread(target=self._tick, args=(httpd,), name="kubeapi-tick",
                                daemon=True)
        self._threads = [serve, tick]
        for thread in self._threads:
            thread.start()
        return self

    def _tick(self, httpd: ApiHTTPServer) -> None:
        while not httpd.stop_event.wait(0.25):
            self.cluster.tick()

    def stop(self) -> None:
        """Stop listening and cut every open connection (state is kept; start() resumes)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.stop_event.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.cut_connections()
        for thread in self._threads:
            thread.join(timeout=5)

    @contextmanager
    def unreachable(self) -> Iterator[None]:
        """Refuse connections (as if the API server were down) for the duration of the block."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- client configuration ------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def admin_token(self) -> str:
        return self.cluster.authn.admin_token

    @property
    def history_size(self) -> int:
        return self.cluster.store.history_size

    @history_size.setter
    def history_size(self, size: int) -> None:
        self.cluster.store.history_size = size

    def kubeconfig(self, token: str | None = None, namespace: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "kubeapi", "cluster": {"server": self.url}}],
            "users": [{"name": "kubeapi-user", "user": {"token": token or self.admin_token}}],
            "contexts": [{"name": "kubeapi", "context": {
                "cluster": "kubeapi", "user": "kubeapi-user", "namespace": namespace}}],
            "current-context": "kubeapi",
        }

    def write_kubeconfig(self, path: str | Path, token: str | None = None,
                         namespace: str = "default") -> Path:
        """Write a kubeconfig (plain http, bearer token; admin unless `token`) to `path`."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.kubeconfig(token, namespace)))
        return path
