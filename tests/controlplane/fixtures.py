"""pytest fixtures: one real control plane for the session, or a real cluster.

`cluster` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK on
loopback once per test session (built from Go modules on first use). With
`KUBELAB_TEST_KUBECONFIG=/path/to/kubeconfig` the same tests run against that cluster
instead; tests that drive the simulated nodes (`simulated_cluster`) skip there.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .cluster import ControlPlane, NodeSpec, kubeconfig_document

REAL_CLUSTER_ENV = "KUBELAB_TEST_KUBECONFIG"


def real_kubeconfig() -> str | None:
    return os.environ.get(REAL_CLUSTER_ENV) or None


class RealCluster:
    """The parts of `ControlPlane` that make sense on a cluster someone else runs."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        document = yaml.safe_load(kubeconfig.read_text())
        context_name = document["current-context"]
        context = next(c["context"] for c in document["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in document["clusters"] if c["name"] == context["cluster"])
        self.server = cluster["server"]
        self._ca = cluster.get("certificate-authority")
        self._ca_data = cluster.get("certificate-authority-data")

    def token_for(self, namespace: str, service_account: str, seconds: int = 3600) -> str:
        from kubernetes import client, config

        with config.new_client_from_config(str(self.kubeconfig)) as api:
            answer = client.CoreV1Api(api).create_namespaced_service_account_token(
                service_account,
                namespace,
                client.AuthenticationV1TokenRequest(
                    spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds)
                ),
            )
        assert answer.status is not None
        return str(answer.status.token)

    def write_kubeconfig(
        self, path: Path, *, token: str | None = None, namespace: str | None = None, **_: Any
    ) -> Path:
        if token is None:
            return self.kubeconfig
        cluster: dict[str, Any] = {"server": self.server}
        if self._ca:
            cluster["certificate-authority"] = self._ca
        if self._ca_data:
            cluster["certificate-authority-data"] = self._ca_data
        document = kubeconfig_document(self.server, Path(self._ca or ""), token=token, namespace=namespace)
        document["clusters"][0]["cluster"] = cluster
        path.write_text(yaml.safe_dump(document))
        path.chmod(0o600)
        return path


@pytest.fixture(scope="session")
def cluster() -> Iterator[ControlPlane | RealCluster]:
    """The session's cluster: a loopback control plane, or `$KUBELAB_TEST_KUBECONFIG`'s."""
    real = real_kubeconfig()
    if real:
        yield RealCluster(Path(real))
        return
    with (
        tempfile.TemporaryDirectory(prefix="kubelab-cluster-") as workdir,
        ControlPlane(Path(workdir)) as plane,
    ):
        yield plane


@pytest.fixture
def simulated_cluster(cluster: ControlPlane | RealCluster) -> ControlPlane:
    """The loopback control plane, for tests that drive KWOK's nodes and pods."""
    if not isinstance(cluster, ControlPlane):
        pytest.skip(f"drives simulated nodes; {REAL_CLUSTER_ENV} points at a real cluster")
    return cluster


@pytest.fixture
def kubeconfig(cluster: ControlPlane | RealCluster) -> Path:
    """The admin's kubeconfig (a user who may create namespaces, RBAC and Jobs)."""
    return cluster.kubeconfig


@pytest.fixture
def make_node(simulated_cluster: ControlPlane) -> Iterator[Callable[..., str]]:
    """Add a simulated node for this test only (a unique name; removed afterwards)."""
    made: list[str] = []

    def make(prefix: str = "node", **fields: Any) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        simulated_cluster.add_node(NodeSpec(name, **fields))
        made.append(name)
        simulated_cluster.wait_node_ready(name)
        return name

    yield make
    for name in made:
        simulated_cluster.delete_node(name)


@pytest.fixture
def metrics_cluster(cluster: ControlPlane | RealCluster) -> Iterator[ControlPlane]:
    """The loopback control plane with metrics-server serving `metrics.k8s.io` (built on first
    use, tests/controlplane/metrics_server.py) for one test (it starts in a second or two);
    removed after it, so other tests see no metrics API."""
    if not isinstance(cluster, ControlPlane):
        pytest.skip(f"starts metrics-server on the loopback cluster; {REAL_CLUSTER_ENV} is set")
    from .metrics_server import running

    with running(cluster):
        yield cluster
