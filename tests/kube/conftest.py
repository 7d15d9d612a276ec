"""Fixtures for the Kubernetes backend: a user namespace with the notebook's Role, a backend
authenticated as the notebook's ServiceAccount, and an `Experiments` service on top of it.

On the loopback control plane (tests/controlplane) the backend runs with a bound token of the
`notebook` ServiceAccount, whose only rights come from `hub_config/rbac/notebook-role.yaml`,
so every test also proves that Role is sufficient. With `KUBELAB_TEST_KUBECONFIG` the same tests
run against a real cluster in fresh namespaces; tests that drive simulated nodes skip there.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.faults import FaultProxy
from controlplane.fixtures import RealCluster
from kube_support import PROJECT_LABEL, notebook_env, role_documents, wait_for
from kubelab_testing import manifest
from kubernetes import client, config

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.errors import RetryPolicy
from kubelab.backends.kubernetes.priority_classes import priority_classes
from kubelab.experiments import Experiments

FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05)


@pytest.fixture
def admin(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(str(kubeconfig)) as api:
        yield api


def make_namespace(admin: client.ApiClient, service_account: str = "notebook") -> str:
    name = f"kl-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin)
    core.create_namespace(manifest({"metadata": {"name": name}}))
    rbac = client.RbacAuthorizationV1Api(admin)
    role, binding = role_documents(name, service_account)
    rbac.create_namespaced_role(name, manifest(role))
    rbac.create_namespaced_role_binding(name, manifest(binding))
    core.create_namespaced_service_account(name, manifest({"metadata": {"name": service_account}}))
    claims = ("home-alice", "archive-alice")  # what notebook_env mounts, as a spawner makes
    for claim in claims:
        core.create_namespaced_persistent_volume_claim(
            name,
            manifest(
                {
                    "metadata": {"name": claim},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ),
        )
    # bound before a test's pods ask for them (else the scheduler's first word is about claims)
    wait_for(
        lambda: all(
            c.status is not None and c.status.phase == "Bound"
            for c in core.list_namespaced_persistent_volume_claim(name).items
        ),
        what="the workspace claims bound",
    )
    return name


@pytest.fixture
def namespace(admin: client.ApiClient) -> Iterator[str]:
    name = make_namespace(admin)
    yield name
    client.CoreV1Api(admin).delete_namespace(name)  # Terminating; the cluster cleans up


@pytest.fixture
def notebook_kubeconfig(cluster: ControlPlane | RealCluster, namespace: str, tmp_path: Path) -> Path:
    """Credentials of the notebook's ServiceAccount: a bound token, as its pod would have."""
    return cluster.write_kubeconfig(
        tmp_path / "notebook-kubeconfig", token=cluster.token_for(namespace, "notebook"), namespace=namespace
    )


@pytest.fixture
def project_node(make_node: Callable[..., str], namespace: str) -> Callable[..., str]:
    """A simulated node only this test's experiments select (its project label)."""

    def make(prefix: str = "n", labels: dict[str, str] | None = None, **fields: Any) -> str:
        return make_node(prefix, labels={PROJECT_LABEL: namespace, **(labels or {})}, **fields)

    return make


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "runs").mkdir(parents=True)
    return path


@pytest.fixture
def make_backend(
    notebook_kubeconfig: Path, namespace: str, home: Path
) -> Iterator[Callable[..., KubernetesBackend]]:
    made: list[KubernetesBackend] = []

    def make(start: bool = True, kubeconfig: Path | None = None, **changes: Any) -> KubernetesBackend:
        backend = KubernetesBackend.from_kubeconfig(
            kubeconfig or notebook_kubeconfig,
            notebook_env(namespace, home, **changes),
            runs_root=home / "runs",
            retry=FAST_RETRY,
            watch_timeout=30,
        )
        made.append(backend)
        if start:
            backend.start()
            assert backend.watcher is not None and backend.watcher.wait_synced(10)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.fixture
def backend(make_backend: Callable[..., KubernetesBackend]) -> KubernetesBackend:
    return make_backend()


@pytest.fixture
def lab(home: Path, backend: KubernetesBackend) -> Experiments:
    return Experiments(home=home, backend=backend, user="alice")


@pytest.fixture
def priority_classes_applied(simulated_cluster: ControlPlane) -> None:
    """kubelab's PriorityClasses on the cluster, as an admin applies `kubelab hub render --all`."""
    for document in priority_classes():
        simulated_cluster.apply(document, "/apis/scheduling.k8s.io/v1/priorityclasses")


@pytest.fixture
def prioritised(
    priority_classes_applied: None, make_backend: Callable[..., KubernetesBackend], home: Path
) -> Experiments:
    """A notebook's lab on a cluster whose admin applied kubelab's PriorityClasses."""
    return Experiments(home=home, backend=make_backend(priority_classes=True), user="alice")


@pytest.fixture
def proxy(simulated_cluster: ControlPlane) -> Iterator[FaultProxy]:
    """A proxy in front of the API server: it records every request, and fails those it is told to."""
    faults = simulated_cluster.fault_proxy()
    yield faults
    faults.close()


@pytest.fixture
def proxied_lab(
    simulated_cluster: ControlPlane,
    proxy: FaultProxy,
    make_backend: Callable[..., KubernetesBackend],
    namespace: str,
    home: Path,
    tmp_path: Path,
) -> Experiments:
    """An `Experiments` service whose backend (watching, as a server's) talks to the API server
    through the proxy, with the notebook's token."""
    kubeconfig = simulated_cluster.write_kubeconfig(
        tmp_path / "proxied",
        token=simulated_cluster.token_for(namespace, "notebook"),
        namespace=namespace,
        server=proxy.url,
    )
    return Experiments(home=home, backend=make_backend(kubeconfig=kubeconfig), user="alice")
