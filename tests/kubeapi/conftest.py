"""Clients for the kubeapi tests: the official `kubernetes` client, configured by kubeconfig."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from kubeapi import KubeApiServer


def sync_client(server: KubeApiServer, tmp_path: Path, token: str | None = None,
                name: str = "kubeconfig") -> client.ApiClient:
    path = server.write_kubeconfig(tmp_path / f"{name}-{uuid.uuid4().hex[:6]}", token=token)
    return config.new_client_from_config(str(path))


@pytest.fixture
def api(kube_api: KubeApiServer, tmp_path: Path) -> Iterator[client.ApiClient]:
    with sync_client(kube_api, tmp_path) as api_client:
        yield api_client


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def batch(api: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api)


@pytest.fixture
def ns(core: client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def pod_body(name: str, image: str = "busybox:1.36", **resources: dict[str, str]) -> dict:
    container = {"name": "main", "image": image}
    if resources:
        container["resources"] = resources
    return {"metadata": {"name": name}, "spec": {"containers": [container]}}


def raw_request(api: client.ApiClient, method: str, path: str, body: object = None):
    """A request the typed client would refuse to send (e.g. unknown fields), same transport."""
    headers = {"Content-Type": "application/json",
               "Authorization": api.configuration.api_key["BearerToken"]}
    response = api.call_api(method, api.configuration.host + path, header_params=headers,
                            body=body)
    response.read()
    return response
