"""Fixtures for the spawner tests: a stand-in for single-user servers inside pods.

The Kubernetes API test server has no kubelet and runs no containers. When a test marks a
notebook pod Running with pod IP 127.0.0.1, KubeSpawner returns `http://127.0.0.1:<port>`,
and JupyterHub then waits for an HTTP answer there (any non-5xx will do) before it routes the
user. This responder gives that answer and records the paths it was asked for, so a test
can check the hub's proxy really sent the user to "the pod".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubelab_testing import JsonStandIn


@pytest.fixture(scope="module")
def pod_stand_in() -> Iterator[JsonStandIn]:
    with JsonStandIn(lambda path: {"stand-in": "single-user server"}) as stand_in:
        yield stand_in
