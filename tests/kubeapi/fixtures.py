"""pytest fixtures for the test API server, or for a real cluster.

Set `KUBELAB_TEST_KUBECONFIG=/path/to/kubeconfig` to run the API-only tests against a real
cluster: `kube_kubeconfig` then yields that file and `kube_api` (which needs the test
controls) skips with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import KubeApiServer

REAL_CLUSTER_ENV = "KUBELAB_TEST_KUBECONFIG"


def real_kubeconfig() -> str | None:
    return os.environ.get(REAL_CLUSTER_ENV) or None


@pytest.fixture
def kube_api() -> Iterator[KubeApiServer]:
    """A started test API server with the Kubeflow and Kueue APIs, one node-less cluster."""
    if real_kubeconfig():
        pytest.skip(f"needs the test server's controls; {REAL_CLUSTER_ENV} points at a real "
                    "cluster")
    with KubeApiServer(extensions=("kubeflow", "kueue")) as server:
        yield server


@pytest.fixture
def kube_api_plain() -> Iterator[KubeApiServer]:
    """A test API server without optional API groups ("Training Operator not installed")."""
    if real_kubeconfig():
        pytest.skip(f"needs the test server's controls; {REAL_CLUSTER_ENV} points at a real "
                    "cluster")
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """An admin kubeconfig: the real cluster's when configured, else a test server's."""
    real = real_kubeconfig()
    if real:
        return Path(real)
    server: KubeApiServer = request.getfixturevalue("kube_api")
    return server.write_kubeconfig(tmp_path / "kubeconfig")
