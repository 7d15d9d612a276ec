"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, and KWOK simulating nodes and pod lifecycles.

Everything listens on 127.0.0.1 with TLS, authenticates with certificates and service-account
tokens, authorizes with RBAC and the Node authorizer, and admits with the plugins a production
cluster has (PodSecurity and ResourceQuota among them). What KWOK simulates is only what a
kubelet would do: node status, pod status, and container logs (from files named by KWOK `Logs`
objects). Nothing here answers an API request itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import pki
from .build import MODULES, ensure_built
from .faults import FaultProxy

KWOK_NODE = {"kwok.x-k8s.io/node": "fake"}
GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
STORAGE_CLASS = "standard"
PROVISIONER = "kubelab.dev/loopback-provisioner"
RESOURCE_METRICS_PATH = "metrics.k8s.io/resource-metrics-path"


@dataclass(frozen=True)
class NodeSpec:
    """A simulated node: its capacity, labels and taints."""

    name: str
    cpu: str = "32"
    memory: str = "256Gi"
    ephemeral_storage: str = "500Gi"  # what a kubelet reports of its disk; pods may ask for it
    gpus: int = 0
    gpu_type: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    extended: dict[str, str] = field(default_factory=dict)  # e.g. a MIG profile's resource
    taints: tuple[dict[str, str], ...] = ()

    @property
    def metrics_path(self) -> dict[str, str]:
        """Where metrics-server reads this node's kubelet resource metrics: KWOK's path for it."""
        return {RESOURCE_METRICS_PATH: f"/metrics/nodes/{self.name}/metrics/resource"}

    def manifest(self) -> dict[str, Any]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **self.labels,
        }
        capacity = {
            "cpu": self.cpu,
            "memory": self.memory,
            "ephemeral-storage": self.ephemeral_storage,
            "pods": "110",
        }
        capacity.update(self.extended)
        taints = list(self.taints)
        if self.gpus:
            capacity[GPU] = str(self.gpus)
            taints.append(GPU_TAINT)
        if self.gpu_type:
            labels["gpu-type"] = self.gpu_type
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {**KWOK_NODE, **self.metrics_path},
            },
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": capacity, "allocatable": capacity},
        }


# The lab's simulated fleet: two A100 and two T4 GPU nodes (GPUs tainted, as GPU node pools
# are) and two CPU nodes. Tests that need a node of their own add one with a unique label.
DEFAULT_NODES = (
    NodeSpec("a100-0", cpu="64", memory="512Gi", gpus=8, gpu_type="A100"),
    NodeSpec("a100-1", cpu="64", memory="512Gi", gpus=8, gpu_type="A100"),
    NodeSpec("t4-0", cpu="32", memory="128Gi", gpus=4, gpu_type="T4"),
    NodeSpec("t4-1", cpu="32", memory="128Gi", gpus=4, gpu_type="T4"),
    NodeSpec("cpu-0", cpu="32", memory="128Gi"),
    NodeSpec("cpu-1", cpu="32", memory="128Gi"),
)

ADMISSION_PLUGINS = (
    "NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,"
    "DefaultTolerationSeconds,PodSecurity,Priority,RuntimeClass,"
    "NodeRestriction,TaintNodesByCondition,StorageObjectInUseProtection,"
    "PersistentVolumeClaimResize,MutatingAdmissionWebhook,"
    "ValidatingAdmissionPolicy,ValidatingAdmissionWebhook,ResourceQuota"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started us dies (no orphans after a crash)."""
    os.setsid()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def kubeconfig_document(
    server: str,
    ca: Path,
    *,
    token: str | None = None,
    cert: pki.KeyPair | None = None,
    namespace: str | None = None,
    user: str = "admin",
) -> dict[str, Any]:
    credentials: dict[str, str] = {}
    if token:
        credentials["token"] = token
    if cert:
        credentials.update({"client-certificate": str(cert.cert), "client-key": str(cert.key)})
    context: dict[str, str] = {"cluster": "kubelab", "user": user}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "kubelab",
        "clusters": [{"name": "kubelab", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "kubelab", "context": context}],
    }


class ControlPlane:
    """Start with `with ControlPlane(workdir) as cp:`; `cp.kubeconfig` is the admin's."""

    def __init__(
        self,
        workdir: Path | None = None,
        nodes: tuple[NodeSpec, ...] = DEFAULT_NODES,
        complete_after: float | None = None,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kubelab-cluster-"))
        self.nodes = nodes
        self.complete_after = complete_after
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = self.workdir / "admin.kubeconfig"
        self.logs_dir = self.workdir / "pod-logs"
        self._stopping = threading.Event()
        self._provisioner: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120) -> None:
        binaries = ensure_built(quiet=True)
        deadline = time.monotonic() + timeout
        self._make_credentials()
        etcd_port, peer_port = free_port(), free_port()
        self._spawn(
            "etcd",
            [
                str(binaries["etcd"]),
                "--name",
                "kubelab",
                "--data-dir",
                str(self.workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"kubelab=http://127.0.0.1:{peer_port}",
                "--listen-metrics-urls",
                f"http://127.0.0.1:{free_port()}",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
            ],
        )
        self._wait_http(f"http://127.0.0.1:{etcd_port}/health", deadline, "etcd")
        pki_dir = self.workdir / "pki"
        self._spawn(
            "kube-apiserver",
            [
                str(binaries["kube-apiserver"]),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                f"--cert-dir={pki_dir}",
                f"--tls-cert-file={pki_dir / 'apiserver.crt'}",
                f"--tls-private-key-file={pki_dir / 'apiserver.key'}",
                f"--client-ca-file={self.ca}",
                f"--service-account-issuer=https://127.0.0.1:{self.port}",
                f"--service-account-key-file={pki_dir / 'sa.pub'}",
                f"--service-account-signing-key-file={pki_dir / 'sa.key'}",
                "--api-audiences=https://kubernetes.default.svc",
                "--authorization-mode=Node,RBAC",
                f"--enable-admission-plugins={ADMISSION_PLUGINS}",
                "--allow-privileged=true",
                "--service-cluster-ip-range=10.96.0.0/16",
                f"--kubelet-client-certificate={pki_dir / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki_dir / 'apiserver-kubelet-client.key'}",
                # the aggregation layer (metrics-server's API): the API server proxies to an
                # extension API server as `front-proxy-client`, the user in request headers
                f"--requestheader-client-ca-file={self.front_proxy_ca}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={self.front_proxy_client.cert}",
                f"--proxy-client-key-file={self.front_proxy_client.key}",
                "--kubelet-preferred-address-types=InternalIP",
                "--profiling=false",
                # the `kubernetes` Service cannot have loopback endpoints (validation refuses them):
                # clients here use kubeconfigs, and the spawner is told the API server's address
                "--endpoint-reconciler-type=none",
                "--v=1",
            ],
        )
        self._wait_https("/readyz", deadline, "kube-apiserver")
        manager_port, scheduler_port = free_port(), free_port()
        manager_kc = self._component_kubeconfig("kube-controller-manager", "system:kube-controller-manager")
        self._spawn(
            "kube-controller-manager",
            [
                str(binaries["kube-controller-manager"]),
                f"--kubeconfig={manager_kc}",
                f"--authentication-kubeconfig={manager_kc}",
                f"--authorization-kubeconfig={manager_kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={manager_port}",
                f"--cert-dir={self.workdir / 'manager-certs'}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki_dir / 'sa.key'}",
                f"--root-ca-file={self.ca}",
                "--controllers=*,-nodeipam,-service-lb-controller",
                "--concurrent-job-syncs=10",
                # quotas recounted every 10 s (default 5 min): a kind a CRD adds is counted, and so
                # admitted, within a test's patience once the controller has discovered it (30 s)
                "--resource-quota-sync-period=10s",
                "--node-monitor-grace-period=60s",
                "--v=1",
            ],
        )
        scheduler_kc = self._component_kubeconfig("kube-scheduler", "system:kube-scheduler")
        self._spawn(
            "kube-scheduler",
            [
                str(binaries["kube-scheduler"]),
                f"--kubeconfig={scheduler_kc}",
                f"--authentication-kubeconfig={scheduler_kc}",
                f"--authorization-kubeconfig={scheduler_kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={scheduler_port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--v=1",
            ],
        )
        self._start_kwok(binaries["kwok"], binaries["logs-crd.yaml"])
        self._wait_https(
            "/healthz", deadline, "kube-controller-manager", base=f"https://127.0.0.1:{manager_port}"
        )
        self._wait_https("/healthz", deadline, "kube-scheduler", base=f"https://127.0.0.1:{scheduler_port}")
        self._bootstrap(deadline)

    def stop(self) -> None:
        """Stop every process, last started first (the API server before its etcd), each with
        TERM and then KILL after 10 s; remove the work folder if this made it."""
        self._stopping.set()
        for process in reversed(list(self.processes.values())):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
        if self._provisioner:
            self._provisioner.join(5)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- credentials ----------------------------------------------------------------------------

    def _make_credentials(self) -> None:
        pki_dir = self.workdir / "pki"
        authority = pki.CertificateAuthority(pki_dir)
        self.ca = authority.cert
        authority.issue(
            "apiserver",
            "kube-apiserver",
            server=True,
            hosts=(
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "10.96.0.1",
            ),
        )
        authority.issue(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("kubeadm:cluster-admins",)
        )
        authority.issue("kwok-serving", "kwok", server=True, hosts=("127.0.0.1", "localhost"))
        self._authority = authority
        front_proxy = pki.CertificateAuthority(pki_dir / "front-proxy")
        self.front_proxy_ca = front_proxy.cert
        self.front_proxy_client = front_proxy.issue("front-proxy-client", "front-proxy-client")
        pki.service_account_keys(pki_dir)
        self.admin_cert = authority.issue("admin", "kubelab-admin", ("system:masters",))
        self.write_kubeconfig(self.kubeconfig, cert=self.admin_cert)

    def _component_kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        pair = self._authority.issue(name, user, groups)
        return self.write_kubeconfig(self.workdir / f"{name}.kubeconfig", cert=pair, user=user)

    def write_kubeconfig(
        self,
        path: Path,
        *,
        token: str | None = None,
        cert: pki.KeyPair | None = None,
        namespace: str | None = None,
        user: str = "admin",
        server: str | None = None,
    ) -> Path:
        """A kubeconfig for this cluster: the admin's by default, or a token's (through
        `server`, a fault proxy, if given)."""
        if token is None and cert is None:
            cert = self.admin_cert
        document = kubeconfig_document(
            server or self.server, self.ca, token=token, cert=cert, namespace=namespace, user=user
        )
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path

    def token_for(self, namespace: str, service_account: str, seconds: int = 3600) -> str:
        """A bound token of a ServiceAccount, as a pod that mounts it would get (TokenRequest)."""
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        answer = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token", body
        )
        return str(answer["status"]["token"])

    def fault_proxy(self) -> FaultProxy:
        """A proxy in front of the API server that fails requests on demand (close it)."""
        return FaultProxy(
            self.server,
            self.ca,
            self._authority.issue(f"proxy-{free_port()}", "fault-proxy", server=True, hosts=("127.0.0.1",)),
        )

    # -- talking to the API server as the admin (bootstrap and test helpers) ---------------------

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.admin_cert.cert), str(self.admin_cert.key))
        return context

    def request(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """One admin request; the decoded answer (HTTPError on a non-2xx status)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={"Content-Type": content_type, "Accept": "application/json"},
        )
        with urllib.request.urlopen(request, context=self._ssl_context(), timeout=30) as answer:
            raw = answer.read()
        return json.loads(raw) if raw else None

    def apply(self, document: dict[str, Any], path: str) -> Any:
        """Create or replace `document` at collection `path` (admin, server-side apply)."""
        name = document["metadata"]["name"]
        return self.request(
            "PATCH",
            f"{path}/{name}?fieldManager=kubelab-tests&force=true",
            document,
            content_type="application/apply-patch+yaml",
        )

    # -- custom resources -------------------------------------------------------------------------

    _CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

    def install_crd(self, crd: dict[str, Any], timeout: float = 30) -> None:
        """Create (or update) a CustomResourceDefinition and wait until it is served and listed
        by API discovery. `Established` alone is not enough: the new group's versions reach
        `/apis/<group>/<version>` only once the API server's aggregator has registered them,
        a moment later (longer on a busy machine), and a client asking discovery in between
        (KubeApi.serves) is told the kind is not served."""
        self.apply(crd, self._CRDS)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.request("GET", f"{self._CRDS}/{crd['metadata']['name']}")
            established = any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (got.get("status") or {}).get("conditions") or []
            )
            if established and all(self._discovered(crd, version) for version in _served(crd)):
                return
            time.sleep(0.1)
        raise TimeoutError(f"{crd['metadata']['name']} was not established and discovered")

    def remove_crd(self, name: str, timeout: float = 30) -> None:
        """Delete a CustomResourceDefinition (and its objects) and wait until it is gone, from
        discovery too (a later test asking discovery must not be told it is still served)."""
        import urllib.error

        deadline = time.monotonic() + timeout
        crd: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            try:
                crd = self.request("GET", f"{self._CRDS}/{name}")
                self.request("DELETE", f"{self._CRDS}/{name}")
            except urllib.error.HTTPError as error:
                if error.code != 404:
                    raise
                if crd is None or not any(self._discovered(crd, v) for v in _served(crd)):
                    return
            time.sleep(0.2)
        raise TimeoutError(f"{name} was not removed")

    def _discovered(self, crd: dict[str, Any], version: str) -> bool:
        """Whether `/apis/<group>/<version>` lists the CRD's resource."""
        import urllib.error

        try:
            found = self.request("GET", f"/apis/{crd['spec']['group']}/{version}")
        except urllib.error.HTTPError as error:
            if error.code in (404, 503):  # not (or no longer) registered with the aggregator
                return False
            raise
        plural = crd["spec"]["names"]["plural"]
        return any(r.get("name") == plural for r in found.get("resources") or [])

    # -- nodes ----------------------------------------------------------------------------------

    def add_node(self, node: NodeSpec) -> None:
        """Create a KWOK node; it reports Ready within a moment (wait with `wait_node_ready`)."""
        self.request("POST", "/api/v1/nodes", node.manifest())  # a Node keeps its status

    def delete_node(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.request("DELETE", f"/api/v1/nodes/{name}")

    def wait_node_ready(self, name: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.request("GET", f"/api/v1/nodes/{name}")
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            self._check_alive("kwok")
            if conditions.get("Ready") == "True" and not any(
                t.get("key") == "node.kubernetes.io/not-ready" for t in node["spec"].get("taints", [])
            ):
                return
            time.sleep(0.1)
        raise TimeoutError(f"node {name} did not become Ready in {timeout} s")

    # -- pods: the simulated kubelet's knobs ----------------------------------------------------

    def end_pod(
        self,
        namespace: str,
        pod: str,
        outcome: str = "Succeeded",
        exit_code: int | None = None,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        """Tell KWOK how a running pod ends: Succeeded, Failed (an exit code and a reason such
        as OOMKilled), Evicted or ImagePullBackOff. The Job controller takes it from there."""
        annotations = {"kwok.kubelab.dev/outcome": outcome}
        if exit_code is not None:
            annotations["kwok.kubelab.dev/exit-code"] = str(exit_code)
        if reason is not None:
            annotations["kwok.kubelab.dev/reason"] = reason
        if message is not None:
            annotations["kwok.kubelab.dev/message"] = message
        self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{pod}",
            {"metadata": {"annotations": annotations}},
            content_type="application/merge-patch+json",
        )

    def append_log(self, namespace: str, pod: str, *lines: str, container: str = "") -> None:
        """Append lines to a pod's container log, served through the API server's pods/log
        (a KWOK `Logs` object names the file, in the CRI log format a kubelet writes)."""
        folder = self.logs_dir / namespace
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{pod}.log"
        created = path.exists()
        with path.open("a") as log:
            for line in lines:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
                log.write(f"{stamp}.{time.time_ns() % 10**9:09d}Z stdout F {line}\n")
        if not created:
            containers = [container] if container else []
            if not containers:
                pod_object = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
                containers = [c["name"] for c in pod_object["spec"]["containers"]]
            self.apply(
                {
                    "apiVersion": "kwok.x-k8s.io/v1alpha1",
                    "kind": "Logs",
                    "metadata": {"name": pod, "namespace": namespace},
                    "spec": {"logs": [{"containers": containers, "logsFile": str(path), "follow": True}]},
                },
                f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{namespace}/logs",
            )
        if lines:
            self.wait_log_served(namespace, pod, lines[-1], container)

    def wait_log_served(self, namespace: str, pod: str, line: str, container: str = "") -> None:
        """Until the API server serves `line` in the pod's log, where KWOK serves the pod (bound
        to a node): KWOK reads a new `Logs` object a moment after it is made, and a test that
        ends the pod at once would otherwise race it."""
        pod_object = self.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
        if not (pod_object.get("spec") or {}).get("nodeName"):
            return
        name = container or pod_object["spec"]["containers"][0]["name"]
        url = f"{self.server}/api/v1/namespaces/{namespace}/pods/{pod}/log?container={name}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, context=self._ssl_context(), timeout=10) as answer:
                    if line in answer.read().decode(errors="replace"):
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"pod {namespace}/{pod} never served the log line {line!r}")

    # -- internals ------------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> None:
        log_dir = self.workdir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(log_dir / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
                cwd=self.workdir,
            )

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.workdir / "logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _check_alive(self, name: str) -> None:
        process = self.processes.get(name)
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode}:\n{self.log_tail(name)}")

    def _wait_http(self, url: str, deadline: float, name: str, context: ssl.SSLContext | None = None) -> None:
        last: Exception | None = None
        while time.monotonic() < deadline:
            self._check_alive(name)
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as answer:
                    if answer.status == 200:
                        return
            except Exception as error:
                last = error
            time.sleep(0.1)
        raise TimeoutError(f"{name} not ready at {url}: {last}\n{self.log_tail(name)}")

    def _wait_https(self, path: str, deadline: float, name: str, base: str | None = None) -> None:
        if base is None:
            context = self._ssl_context()
        else:  # a component's self-signed serving certificate; /healthz needs no identity
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self._wait_http((base or self.server) + path, deadline, name, context)

    def _start_kwok(self, binary: Path, logs_crd: Path) -> None:
        kwok_port = free_port()
        config = (MODULES / "kwok" / "stages.yaml").read_text()
        config += "\n---\n" + (MODULES / "kwok" / "metrics.yaml").read_text()
        if self.complete_after is not None:
            extra = (MODULES / "kwok" / "auto-complete.yaml").read_text()
            config += "\n---\n" + extra.replace("DELAY_MS", str(int(self.complete_after * 1000)))
        config_path = self.workdir / "kwok.yaml"
        config_path.write_text(config)
        self.install_crd(yaml.safe_load(logs_crd.read_text()))  # KWOK's `Logs`, kept by the build
        pki_dir = self.workdir / "pki"
        kwok_kc = self._component_kubeconfig("kwok", "kwok-controller", ("system:masters",))
        self._spawn(
            "kwok",
            [
                str(binary),
                f"--kubeconfig={kwok_kc}",
                f"--config={config_path}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=127.0.0.1",
                f"--node-port={kwok_port}",
                f"--server-address=127.0.0.1:{kwok_port}",
                f"--tls-cert-file={pki_dir / 'kwok-serving.crt'}",
                f"--tls-private-key-file={pki_dir / 'kwok-serving.key'}",
                "--enable-crds=Logs",
                "--cidr=127.0.0.1/32",
            ],
        )

    def _bootstrap(self, deadline: float) -> None:
        """Nodes, a default StorageClass with a provisioner, and the default ServiceAccount."""
        for node in self.nodes:
            self.add_node(node)
        self.apply(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {
                    "name": STORAGE_CLASS,
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": PROVISIONER,
                "reclaimPolicy": "Delete",
                "volumeBindingMode": "Immediate",
                "allowVolumeExpansion": True,
            },
            "/apis/storage.k8s.io/v1/storageclasses",
        )
        from .provisioner import LoopbackProvisioner

        self._provisioner = LoopbackProvisioner(self, self._stopping).start()
        for node in self.nodes:
            self.wait_node_ready(node.name, max(1.0, deadline - time.monotonic()))
        while time.monotonic() < deadline:  # the controller-manager's ServiceAccount controller
            try:
                self.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
                return
            except Exception:  # not there yet
                self._check_alive("kube-controller-manager")
                time.sleep(0.1)
        raise TimeoutError(
            "the default ServiceAccount never appeared "
            f"(controller-manager):\n{self.log_tail('kube-controller-manager')}"
        )


def _served(crd: dict[str, Any]) -> list[str]:
    """The versions a CustomResourceDefinition serves."""
    return [v["name"] for v in crd["spec"].get("versions") or [] if v.get("served", True)]
