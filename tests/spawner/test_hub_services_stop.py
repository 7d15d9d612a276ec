"""The hub's services stop as soon as JupyterHub signals them.

JupyterHub stops a service with SIGINT, then SIGTERM after 30 s. A hub started in the
background hands its services SIGINT ignored, which Python keeps: the GPU culler and the idle
culler each held the hub's shutdown for 30 s. Each service here is started as the hub starts it
(its own session, the hub's API in its environment) with SIGINT ignored as it would inherit it,
against a stand-in for the hub's API that records the service's requests; once it has asked
for the users, it is signalled and must have exited, cleanly, before a generous deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from kubelab_testing import JsonStandIn

DEADLINE = 15.0  # far above the 2 s the services take; far below JupyterHub's 30 s wait


def hub_answer(path: str) -> object:
    """The hub's API as the services read it: no users, and its version."""
    return [] if "/users" in path else {"version": "5.3.0"}


@pytest.fixture
def hub_api() -> Iterator[JsonStandIn]:
    with JsonStandIn(hub_answer) as stand_in:
        yield stand_in


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


SERVICES = {
    "gpu-culler": ["-m", "kubelab.spawner.culling", "--every=300"],
    "idle-culler": ["-m", "kubelab.spawner.hub_service", "jupyterhub_idle_culler", "--cull-every=300"],
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_hub_service_exits_promptly_when_signalled(
    service: str, sig: signal.Signals, hub_api: JsonStandIn
) -> None:
    url = f"{hub_api.url}/hub/api"
    env = {**os.environ, "JUPYTERHUB_API_URL": url, "JUPYTERHUB_API_TOKEN": "service-token"}
    args = SERVICES[service] + ([f"--url={url}"] if service == "idle-culler" else [])
    process = subprocess.Popen(
        [sys.executable, *args],
        env=env,
        start_new_session=True,
        preexec_fn=ignore_sigint,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not any("/users" in p for p in hub_api.paths):
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the service never asked the hub for its users"
            time.sleep(0.05)
        process.send_signal(sig)
        deadline = time.monotonic() + DEADLINE
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() == 0, f"{service} still running or unclean after {sig.name}"
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
