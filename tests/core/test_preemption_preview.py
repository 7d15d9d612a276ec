"""What a new run would preempt: the ledger's own placement asked for a run not yet submitted
(kubelab/backends/local/placement.py), and its REST route on a real Jupyter server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer

from kubelab.backends.local.gpus import Gpu, GpuAllocator
from kubelab.priorities import HIGH_PRIORITY, LOW_PRIORITY, NORMAL_PRIORITY


def machine(tmp_path: Path) -> GpuAllocator:
    """Five GPUs: exp-9, an elastic low run on four (one replica each, two at least), then
    exp-12, a low run on the fifth (the newest: the plan takes it first)."""
    ledger = GpuAllocator([Gpu(i, "T4") for i in range(5)], tmp_path)
    me = os.getpid()
    assert ledger.try_acquire("exp-9", me, 4, priority=LOW_PRIORITY, preemptible=True, elastic=(1, 2))
    assert ledger.try_acquire("exp-12", me, 1, priority=LOW_PRIORITY, preemptible=True) == [4]
    return ledger


def test_the_preview_is_the_decision_the_scheduler_then_makes(tmp_path: Path) -> None:
    ledger = machine(tmp_path)
    seen = ledger.preview(3, HIGH_PRIORITY)
    assert seen == {
        "gpus": [],
        "changes": [
            {"run": "exp-12", "priority": LOW_PRIORITY, "action": "preempt"},
            {"run": "exp-9", "priority": LOW_PRIORITY, "action": "shrink", "replicas": 4, "to": 2},
        ],
        "ahead": 0,
    }
    assert ledger.preemption("exp-9") is None and ledger.preemption("exp-12") is None  # asked, not done
    assert ledger.try_acquire("urgent", os.getpid(), 3, priority=HIGH_PRIORITY) is None
    assert {k: v for k, v in (ledger.preemption("exp-12") or {}).items() if k != "since"} == {
        "by": "urgent",
        "priority": HIGH_PRIORITY,
    }
    assert sorted((ledger.preemption("exp-9") or {}).get("gpus") or []) == [
        "2",
        "3",
    ]  # its last two replicas'
    # Behind the waiting run: the same plan is its, once its turn comes.
    assert ledger.preview(1, HIGH_PRIORITY)["ahead"] == 1


def test_a_preview_that_fits_takes_nothing_and_one_that_may_not_preempt_waits(tmp_path: Path) -> None:
    ledger = machine(tmp_path)
    ledger.release("exp-12")
    assert ledger.preview(1, NORMAL_PRIORITY) == {"gpus": [4], "changes": [], "ahead": 0}
    # Not above the holders' priority: nobody is preempted, it waits.
    assert ledger.preview(2, LOW_PRIORITY) == {"gpus": [], "changes": [], "ahead": 0}
    # An elastic run's smaller size that fits is taken before anyone is preempted.
    assert ledger.preview(2, HIGH_PRIORITY, fewer=(1,))["gpus"] == [4]
    with pytest.raises(ValueError, match="asked for 6 GPU"):
        ledger.preview(6, HIGH_PRIORITY)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("preview")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2", "KUBELAB_FAKE_GPUS": "2"}
    with JupyterServer(base / "root", base / "home", env=env) as running:
        yield running


def low_run(server: JupyterServer, name: str) -> dict[str, Any]:
    spec = {"name": name, "command": ["sleep", "60"], "resources": {"gpus": 1}, "priority": "low"}
    response = server.post("experiments", spec)
    assert response.status_code == 201, response.text
    record: dict[str, Any] = response.json()
    return record


def test_the_route_names_the_runs_a_new_run_would_preempt(server: JupyterServer) -> None:
    first = low_run(server, "first")  # started (its GPU taken) before the second: the older
    server.wait_for(first["id"], states={"Running"})
    second = low_run(server, "second")
    server.wait_for(second["id"], states={"Running"})
    # JupyterLab's requests carry a cache-busting parameter of their own: not read.
    one = server.get("resources/preview", params={"gpus": "1", "priority": "high", "1795722189430": ""})
    assert one.status_code == 200, one.text
    assert one.json() == {
        "backend": "local",
        "gpus": [],
        "changes": [{"id": second["id"], "name": "second", "priority": "low", "action": "preempt"}],
        "ahead": 0,
    }
    both = server.get("resources/preview", params={"gpus": "2", "priority": "normal"}).json()
    assert sorted(change["name"] for change in both["changes"]) == ["first", "second"]
    waits = server.get("resources/preview", params={"gpus": "1"}).json()  # normal by default
    assert len(waits["changes"]) == 1
    low = server.get("resources/preview", params={"gpus": "1", "priority": "low"}).json()
    assert low["changes"] == [] and low["gpus"] == []
    for record in (first, second):  # a preview changes nothing
        assert server.get(f"experiments/{record['id']}").json()["status"] == "Running"
        server.post(f"experiments/{record['id']}/stop")


@pytest.mark.parametrize(
    ("query", "field", "reason"),
    [
        ({"priority": "high"}, "gpus", "is required"),
        ({"gpus": "two"}, "gpus", "must be"),
        ({"gpus": "-1"}, "gpus", "must be"),
        ({"gpus": "0"}, "gpus", "must be more than 0"),
        ({"gpus": "3"}, "gpus", "asked for 3 GPU(s) but this machine has 2"),
        ({"gpus": "1", "priority": "urgent"}, "priority", "must be low, normal, high"),
        ({"gpus": "1", "replicas": "3:1"}, "replicas", ""),
    ],
)
def test_bad_preview_input_is_a_422_naming_the_field(
    server: JupyterServer, query: dict[str, str], field: str, reason: str
) -> None:
    response = server.get("resources/preview", params=query)
    assert response.status_code == 422, response.text
    fields = response.json()["fields"]
    assert any(f["path"] == field and reason in f["reason"] for f in fields), fields


def test_the_preview_needs_the_servers_authentication(server: JupyterServer) -> None:
    response = requests.get(server.api + "resources/preview", params={"gpus": "1"}, timeout=10)
    assert response.status_code in (401, 403)
