"""A real JupyterHub with LocalKubeLabSpawner: real single-user servers with kubelab loaded.

Two fake T4s (`KUBELAB_FAKE_GPUS`) in a machine ledger of the test's own; the notebooks take
them through the same ledger experiments use, which each server's own kubelab API reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hub_process import Hub, hub_samples


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("machine")


@pytest.fixture(scope="module")
def hub(machine: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    directory = tmp_path_factory.mktemp("localhub")
    overrides = (
        "c.LocalKubeLabSpawner.run_as_users = False\nc.LocalKubeLabSpawner.start_timeout = 90\n"
        "c.JupyterHub.authenticate_prometheus = False\n"
    )
    env = {
        "KUBELAB_HUB_MODE": "local",
        "KUBELAB_HUB_ROOT": str(directory / "root"),
        "KUBELAB_FAKE_GPUS": "Tesla T4,Tesla T4",
        "KUBELAB_MACHINE_DIR": str(machine),
    }
    with Hub(directory, overrides, env) as running:
        yield running
        for user in ("alice", "bob", "dave", "erin", "carol"):  # stop servers before the hub goes
            running.api("DELETE", f"users/{user}/server")


def user_token(hub: Hub, user: str) -> str:
    reply = hub.api("POST", f"users/{user}/tokens", {"scopes": [f"access:servers!user={user}"]})
    assert reply.status_code == 201, reply.text
    return str(reply.json()["token"])


def resources(hub: Hub, user: str, token: str) -> dict[str, Any]:
    reply = requests.get(
        f"{hub.url}/user/{user}/kubelab/api/resources",
        timeout=30,
        headers={"Authorization": f"token {token}"},
    )
    assert reply.status_code == 200, reply.text[:2000]
    found: dict[str, Any] = reply.json()
    return found


def holders(snapshot: dict[str, Any]) -> list[str]:
    return sorted(d["holder"] for d in snapshot["gpus"]["devices"] if d["holder"])


def test_local_servers_take_gpus_from_the_machine_ledger(hub: Hub, machine: Path) -> None:
    root = Path(hub.env["KUBELAB_HUB_ROOT"])
    hub.api("POST", "users", {"usernames": ["alice", "bob"]})
    assert hub.api("POST", "users/alice/server", {"gpus": "1(T4)"}).status_code in (201, 202)
    hub.wait_server("alice", timeout=90)
    alice = user_token(hub, "alice")
    seen = resources(hub, "alice", alice)
    assert seen["backend"] == "local"
    assert holders(seen) == ["notebook/alice/public/default"]
    assert (root / "workspaces" / "alice" / ".kubelab").is_dir() and (root / "archives" / "alice").is_dir()
    ledger = json.loads((machine / "gpus.json").read_text())
    assert [h["run"] for h in ledger["allocations"].values()] == ["notebook/alice/public/default"]

    assert hub.api("POST", "users/bob/server", {"gpus": 1}).status_code in (201, 202)
    hub.wait_server("bob", timeout=90)
    assert holders(resources(hub, "bob", user_token(hub, "bob"))) == [
        "notebook/alice/public/default",
        "notebook/bob/public/default",
    ]

    # both T4s are held: the form refuses a third notebook with GPUs and says what is free
    hub.spawn_refused(
        hub.login("carol"),
        "carol",
        {"gpus": "1", "gpu_type": "T4"},
        "you asked for 1 T4 GPU(s) but only 0 of 2 are free now; free by type: T4 0/2",
    )

    # stopping alice's server gives her GPU back to the machine
    assert hub.api("DELETE", "users/alice/server").status_code in (202, 204)
    hub.wait_server("alice", ready=False, timeout=60)
    assert holders(resources(hub, "bob", user_token(hub, "bob"))) == ["notebook/bob/public/default"]


def test_local_form_offers_no_images_and_refuses_one(hub: Hub) -> None:
    session = hub.login("dave")
    page = hub.spawn_page(session, "dave")
    assert 'name="gpus"' in page and 'name="image"' not in page
    assert '<td>T4</td><td class="free">' in page
    hub.spawn_refused(
        session, "dave", {"image": "x:1"}, "image: this hub runs servers on one machine and offers no images"
    )


def test_the_local_hub_exports_gpu_hours_per_user_and_group(hub: Hub) -> None:
    """/hub/metrics counts the ledger's GPUs held by each running server, against the user and
    group the hub started it for (bob's server from the test above holds a T4)."""
    if hub.api("GET", "users/bob").json().get("server") is None:
        assert hub.api("POST", "users/bob/server", {"gpus": 1}).status_code in (201, 202)
        hub.wait_server("bob", timeout=90)
    hours = (
        "jupyterhub_kubelab_gpu_hours_total",
        (("gpu_type", "Tesla T4"), ("group", "public"), ("user", "bob")),
    )
    samples = hub_samples(hub, lambda samples: samples.get(hours, 0) > 0)
    assert 0 < samples.get(hours, 0) < 1, samples  # one T4 for well under an hour
    assert all(dict(labels).get("user") != "alice" for _, labels in samples), samples  # hers stopped


def server_env(pid: int) -> dict[str, str]:
    """A running server's environment, as its process was given it."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_notebooks_asking_half_a_gpu_in_the_form_share_one(hub: Hub, machine: Path) -> None:
    """`0.5` in the form: a share of one T4 in the machine ledger, told as a run's share is
    (KUBELAB_GPU_FRACTION, the same CUDA_VISIBLE_DEVICES); a third half finds no room, and a
    fraction that is not 1/n is refused naming the field."""
    if hub.api("GET", "users/bob").json().get("server") is None:  # bob holds one T4 whole
        assert hub.api("POST", "users/bob/server", {"gpus": 1}).status_code in (201, 202)
        hub.wait_server("bob", timeout=90)
    assert "0.5 or 0.25 to share one" in hub.spawn_page(hub.login("dave"), "dave")
    for user in ("dave", "erin"):
        hub.spawn_accepted(hub.login(user), user, {"gpus": "0.5", "gpu_type": "T4"})
        hub.wait_server(user, timeout=90)
    ledger = json.loads((machine / "gpus.json").read_text())
    [(gpu, sharing)] = ledger["shares"].items()
    assert sorted((h["run"], h["share"]) for h in sharing) == [
        ("notebook/dave/public/default", 0.5),
        ("notebook/erin/public/default", 0.5),
    ]
    for holder in sharing:
        env = server_env(holder["pid"])
        assert (env["KUBELAB_GPU_FRACTION"], env["CUDA_VISIBLE_DEVICES"]) == ("0.5", gpu)

    session = hub.login("frank")
    hub.spawn_refused(
        session, "frank", {"gpus": "0.5(T4)"}, "you asked for 0.5 T4 GPU(s) but only 0 of 2 are free now"
    )
    hub.spawn_refused(
        session,
        "frank",
        {"gpus": "0.3"},
        "gpus: must be a whole number of GPUs, or 1/n of one GPU to share it",
    )


def test_a_groups_priority_cap_refuses_a_members_higher_run(hub: Hub) -> None:
    """The group's `max_priority` reaches the member's server through the hub's environment;
    its backend refuses a high run naming `priority` and the cap, and takes a normal one."""
    assert hub.api("PUT", "groups/public/properties", {"max_priority": "normal"}).ok
    hub.api("POST", "users", {"usernames": ["carol"]})
    assert hub.api("POST", "users/carol/server", {}).status_code in (201, 202)
    hub.wait_server("carol", timeout=90)
    token = user_token(hub, "carol")
    api = f"{hub.url}/user/carol/kubelab/api/experiments"
    headers = {"Authorization": f"token {token}"}
    high = requests.post(api, json={"command": "true", "priority": "high"}, headers=headers, timeout=30)
    assert high.status_code == 422, high.text[:2000]
    assert high.json()["fields"][0]["path"] == "priority" and "normal" in high.json()["fields"][0]["reason"]
    normal = requests.post(api, json={"command": "true", "priority": "normal"}, headers=headers, timeout=30)
    assert normal.status_code == 201, normal.text[:2000]
