"""The GPU culler against a real local hub: a notebook whose GPU sits idle is warned on its own
server, kept once at its user's request, warned again and stopped.

The hub, its proxy, alice's single-user server (with kubelab's server extension) and the GPU
ledger are real; NVML's per-process answers are recorded (tests/core/fixtures), given the real
server's pid; the culler runs in the test with a clock the test moves, and a token holding
exactly the scopes the shipped `kubelab-gpu-culler` role grants.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from hub_process import Hub, open_folder

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.spawner.culling import Culler
from kubelab.spawner.culling import Hub as HubApi
from kubelab.spawner.gpu_idleness import IdlePolicy
from kubelab.spawner.gpu_usage import NvmlUsage, hub_started

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from recorded_nvml import RecordedNvml

A100 = "NVIDIA A100-SXM4-80GB"
MIN = 60.0
ALICE = ("alice", "")


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    with open_folder("kubelab-culler-") as folder:
        overrides = (
            "c.LocalKubeLabSpawner.run_as_users = False\n"
            "c.LocalKubeLabSpawner.start_timeout = 90\n"
            "c.JupyterHub.load_roles[1]['users'] = ['cullerbot']  # the gpu-culler's own role\n"
        )
        env = {
            "KUBELAB_HUB_MODE": "local",
            "KUBELAB_HUB_ROOT": str(folder / "root"),
            "KUBELAB_MACHINE_DIR": str(folder / "machine"),
            "KUBELAB_FAKE_GPUS": A100,
            "KUBELAB_GPU_CULL_EVERY": "3600",  # the hub's own culler stays out of the test's way
        }
        with Hub(folder / "hub", overrides, env) as running:
            yield running
            running.api("DELETE", "users/alice/server")


def token(hub: Hub, user: str, scopes: list[str] | None = None) -> str:
    hub.api("POST", "users", {"usernames": [user]})
    reply = hub.api("POST", f"users/{user}/tokens", {"scopes": scopes} if scopes else {})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["token"])


def test_an_idle_gpu_notebook_is_warned_kept_once_then_stopped(hub: Hub) -> None:
    machine = Path(hub.env["KUBELAB_MACHINE_DIR"])
    hub.api("POST", "users", {"usernames": ["alice"]})
    assert hub.api("POST", "users/alice/server", {"gpus": "1(A100)"}).status_code in (201, 202)
    hub.wait_server("alice", timeout=90)
    assert hub.api("PUT", "groups/public/properties", {"gpu_idle": {"minutes": 20, "warn_minutes": 4}}).ok

    holdings = GpuAllocator([Gpu(0, A100)], machine).holdings
    ((server_pid, gpus),) = [held for run, held in holdings().items() if run.startswith("notebook/alice/")]
    assert gpus == [0]
    nvml = RecordedNvml("nvml_notebooks.json", pids={"alice-server": server_pid, "alice-kernel": server_pid})
    now = [0.0]
    assert hub.process is not None
    culler = Culler(
        HubApi(f"{hub.url}/hub/api", token(hub, "cullerbot"), servers_url=hub.url),
        NvmlUsage(nvml, holdings, vouch=hub_started(hub.process.pid)),  # the culler's parent
        IdlePolicy(),
        clock=lambda: now[0],
    )
    alice = {"Authorization": f"token {token(hub, 'alice', ['access:servers!user=alice'])}"}
    notice_url = f"{hub.url}/user/alice/kubelab/api/idle-notice"

    def rounds_at(minutes: float) -> str:
        now[0] = minutes * MIN
        return culler.round()[ALICE]

    assert rounds_at(0) == "busy"  # the recorded kernel keeps the A100 at 90%
    assert rounds_at(1) == "idle"  # NotFound: no kernel ran since
    assert rounds_at(15) == "idle"
    assert requests.get(notice_url, headers=alice, timeout=30).json() == {"notice": None}
    assert rounds_at(17) == "warn"  # the group's 20 minutes less its 4 of warning, from minute 1
    notice = requests.get(notice_url, headers=alice, timeout=30).json()["notice"]
    assert "under 5% busy for 16 minutes" in notice["message"] and notice["kept"] is None
    assert notice["deadline"] == 21 * MIN

    kept = requests.post(notice_url + "/keep", headers=alice, timeout=30)
    assert kept.status_code == 200 and kept.json()["notice"]["kept"]
    assert rounds_at(21) == "idle"  # kept: the clock restarted, the notice is withdrawn
    assert requests.get(notice_url, headers=alice, timeout=30).json() == {"notice": None}
    hub.wait_server("alice")  # still running

    assert rounds_at(37) == "warn"
    assert rounds_at(41) == "cull"
    hub.wait_server("alice", ready=False, timeout=60)
    assert not any(run.startswith("notebook/alice/") for run in holdings())  # its GPU is back


def test_the_keep_answer_needs_a_notice_and_the_notice_names_its_fields(hub: Hub) -> None:
    hub.api("POST", "users", {"usernames": ["bob"]})
    assert hub.api("POST", "users/bob/server", {}).status_code in (201, 202)
    hub.wait_server("bob", timeout=90)
    bob = {"Authorization": f"token {token(hub, 'bob', ['access:servers!user=bob'])}"}
    url = f"{hub.url}/user/bob/kubelab/api/idle-notice"
    assert requests.post(url + "/keep", headers=bob, timeout=30).status_code == 409
    bad = requests.put(url, json={"message": "", "deadline": "soon"}, headers=bob, timeout=30)
    assert bad.status_code == 422
    assert {f["path"] for f in bad.json()["fields"]} == {"message", "deadline"}
    assert requests.get(url, headers=bob, timeout=30).json() == {"notice": None}  # nothing changed
    hub.api("DELETE", "users/bob/server")
