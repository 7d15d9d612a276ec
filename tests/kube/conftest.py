"""Fixtures for the Kubernetes backend: a user namespace with the notebook's Role, a backend
authenticated as the notebook's ServiceAccount, and a Lab on top of it.

Against the test API server (default) the backend runs with a ServiceAccount token bound by
`hub_config/rbac/notebook-role.yaml`, so every test also proves that Role is sufficient.
With `KUBELAB_TEST_KUBECONFIG` the same tests run against a real cluster with that config in
a fresh namespace; tests that need the server's controls skip there.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_support import notebook_env, pods_of, role_documents, wait_for  # noqa: F401
from kubeapi.fixtures import real_kubeconfig
from kubernetes import client, config

from kubelab.kube.backend import KubernetesBackend
from kubelab.kube.errors import RetryPolicy
from kubelab.lab import Lab

FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05)




@pytest.fixture
def admin(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(str(kubeconfig)) as api:
        yield api


@pytest.fixture
def namespace(admin: client.ApiClient) -> Iterator[str]:
    name = f"kl-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": name}})
    rbac = client.RbacAuthorizationV1Api(admin)
    role, binding = role_documents(name, "notebook")
    rbac.create_namespaced_role(name, role)
    rbac.create_namespaced_role_binding(name, binding)
    core.create_namespaced_service_account(name, {"metadata": {"name": "notebook"}})
    yield name
    if real_kubeconfig():
        core.delete_namespace(name)


@pytest.fixture
def notebook_kubeconfig(request: pytest.FixtureRequest, kubeconfig: Path, namespace: str,
                        tmp_path: Path) -> Path:
    """Credentials of the notebook's ServiceAccount (the admin's on a real cluster)."""
    if real_kubeconfig():
        return kubeconfig
    server = request.getfixturevalue("kube_api")
    token = server.token_for(namespace, "notebook")
    return server.write_kubeconfig(tmp_path / "notebook-kubeconfig", token=token,
                                   namespace=namespace)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "runs").mkdir(parents=True)
    return path




@pytest.fixture
def make_backend(notebook_kubeconfig: Path, namespace: str, home: Path
                 ) -> Iterator[Callable[..., KubernetesBackend]]:
    made: list[KubernetesBackend] = []

    def make(start: bool = True, **changes: Any) -> KubernetesBackend:
        backend = KubernetesBackend.from_kubeconfig(
            notebook_kubeconfig, notebook_env(namespace, home, **changes),
            runs_root=home / "runs", retry=FAST_RETRY, watch_timeout=30)
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
def lab(home: Path, backend: KubernetesBackend) -> Lab:
    return Lab(home=home, backend=backend, user="alice")




