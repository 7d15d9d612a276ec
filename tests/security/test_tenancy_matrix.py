"""The tenancy matrix: user A's credentials against user B's objects and paths, in every mode
that runs here, and each must be refused.

| mode | A's credentials | B's objects | refused by |
| --- | --- | --- | --- |
| single user (`kubelab lab`) | A's server token | B's server: experiments, a run, its logs, sweeps, pipelines, schedules, TensorBoards | Jupyter's token check |
| local hub, as root | A's hub token | B's server (same REST paths); the hub API on B (server, tokens, model) | JupyterHub's scopes |
| local hub, as root | A's uid | B's workspace, its `.kubelab` (runs, logs), B's archive | the kernel (`0700`) |
| local hub, as root | A's uid | B's TensorBoard: its capability (`ps`, `/proc`, `/tmp/.tensorboard-info`), its loopback port | no secret outside B's process; the proxy's token |
| per-user namespaces | A's notebook ServiceAccount token | B's namespace: pods, jobs, logs, secrets, claims, quota | RBAC in the API server |

What other modules already prove is not repeated here: the read-only Authorizer
(`core/test_rest_authorization.py`), root's folders (`spawner/test_local_root.py`), the GPU
ledger (`core/test_gpu_ledger_safety.py`), Pod Security and group quotas inside one's own
namespace (`spawner/test_pod_security_cluster.py`, `spawner/test_group_quota_cluster.py`),
network isolation (`spawner/test_network_policy.py`). Trusted-lab mode keeps nobody apart by
design (docs/security.md), so it has no row.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from controlplane.cluster import ControlPlane
from controlplane.fixtures import RealCluster
from jupyter_server_process import JupyterServer
from kubelab_testing import manifest
from other_account import ASK, OTHER_PYTHON, SNOOP, listening_ports
from system_users import as_user, needs_root, system_user
from world_python import remove, world_python

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spawner"))
from hub_process import Hub, local_hub_env

RUN = "{run}"
REST = [  # B's objects, as paths under B's /kubelab/api/; {run} is one of B's experiments
    ("GET", "experiments"),
    ("GET", f"experiments/{RUN}"),
    ("GET", f"experiments/{RUN}/logs"),
    ("POST", f"experiments/{RUN}/stop"),
    ("DELETE", f"experiments/{RUN}"),
    ("POST", "experiments"),
    ("GET", "sweeps"),
    ("GET", "pipelines"),
    ("GET", "schedules"),
    ("GET", "tensorboards"),
    ("POST", "tensorboards"),
    ("GET", "resources"),
]
SPEC = {"name": "b-private", "command": ["python", "-c", "print('b-secret')"]}


def submit_and_wait(api: str, headers: dict[str, str]) -> str:
    reply = requests.post(api + "experiments", json=SPEC, headers=headers, timeout=30)
    assert reply.status_code == 201, reply.text
    run = str(reply.json()["id"])
    for _ in range(240):
        if (
            requests.get(f"{api}experiments/{run}", headers=headers, timeout=30).json()["status"]
            == "Succeeded"
        ):
            return run
        time.sleep(0.5)
    raise AssertionError(f"B's run {run} did not succeed")


def refused(method: str, url: str, headers: dict[str, str]) -> requests.Response:
    body = SPEC if method == "POST" and url.endswith("experiments") else {}
    return requests.request(method, url, json=body, headers=headers, timeout=30, allow_redirects=False)


# -- single user: two `kubelab lab` servers, A's token at B's server ------------------------------


@pytest.fixture(scope="module")
def two_labs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterServer, JupyterServer, str]]:
    base = tmp_path_factory.mktemp("labs")
    servers = [
        JupyterServer(
            base / n / "root", base / n / "home", env={"KUBELAB_MACHINE_DIR": str(base / "machine")}
        )
        for n in ("a", "b")
    ]
    with servers[0], servers[1]:
        run = submit_and_wait(servers[1].api, servers[1].headers)
        yield servers[0], servers[1], run


@pytest.mark.parametrize(("method", "path"), REST)
def test_single_user_a_token_is_refused_by_b_server(
    two_labs: tuple[JupyterServer, JupyterServer, str], method: str, path: str
) -> None:
    a, b, run = two_labs
    reply = refused(method, b.api + path.replace(RUN, run), a.headers)
    assert reply.status_code in (401, 403), (method, path, reply.status_code, reply.text[:300])
    assert "b-secret" not in reply.text
    assert (
        requests.get(f"{b.api}experiments/{run}", headers=b.headers, timeout=30).json()["status"]
        == "Succeeded"
    )


# -- the local hub as root: real system users, A's hub token and A's uid -------------------------


class LocalLab:
    def __init__(self, hub: Hub, users: dict[str, Any], tokens: dict[str, str], run: str) -> None:
        self.hub, self.users, self.tokens, self.run = hub, users, tokens, run

    def api(self, user: str) -> str:
        return f"{self.hub.url}/user/{user}/kubelab/api/"

    def headers(self, user: str) -> dict[str, str]:
        return {"Authorization": f"token {self.tokens[user]}"}

    def folder(self, user: str, which: str) -> Path:
        root = Path(self.hub.env["KUBELAB_HUB_ROOT"])
        return {
            "workspace": root / "workspaces" / user,
            "runs": root / "workspaces" / user / ".kubelab",
            "archive": root / "archives" / user,
        }[which]


@pytest.fixture(scope="module")
def local_lab() -> Iterator[LocalLab]:
    if os.geteuid() != 0:
        pytest.skip("servers run as their own users only when the hub runs as root")
    folder = Path(tempfile.mkdtemp(prefix="kubelab-tenancy-"))
    folder.chmod(0o755)
    python = world_python(folder / "python")
    env = local_hub_env(folder, KUBELAB_HUB_AUTH="pam")
    try:
        with (
            system_user("kla") as a,
            system_user("klb") as b,
            Hub(
                folder / "hub", "c.LocalKubeLabSpawner.start_timeout = 120\n", env, python=str(python)
            ) as hub,
        ):
            users = {"a": a, "b": b}
            hub.api("POST", "users", {"usernames": [a.pw_name, b.pw_name]})
            tokens = {}
            for key, entry in users.items():
                reply = hub.api("POST", f"users/{entry.pw_name}/tokens", {"note": "tenancy matrix"})
                assert reply.status_code == 201, reply.text
                tokens[key] = reply.json()["token"]
                assert hub.api("POST", f"users/{entry.pw_name}/server", {}).status_code in (201, 202)
                hub.wait_server(entry.pw_name, timeout=120)
            lab = LocalLab(hub, users, {users[k].pw_name: t for k, t in tokens.items()}, "")
            lab.run = submit_and_wait(lab.api(b.pw_name), lab.headers(b.pw_name))
            try:
                yield lab
            finally:
                for entry in users.values():
                    hub.api("DELETE", f"users/{entry.pw_name}/server")
                    hub.wait_server(entry.pw_name, ready=False, timeout=60)
    finally:
        remove(python)
        shutil.rmtree(folder, ignore_errors=True)


@needs_root
@pytest.mark.parametrize(("method", "path"), REST)
def test_local_hub_a_token_is_refused_by_b_server(local_lab: LocalLab, method: str, path: str) -> None:
    a, b = local_lab.users["a"].pw_name, local_lab.users["b"].pw_name
    reply = refused(method, local_lab.api(b) + path.replace(RUN, local_lab.run), local_lab.headers(a))
    assert reply.status_code in (401, 403), (method, path, reply.status_code, reply.text[:300])
    assert "b-secret" not in reply.text


@needs_root
def test_local_hub_a_server_does_not_know_b_runs(local_lab: LocalLab) -> None:
    a = local_lab.users["a"].pw_name
    own = requests.get(
        f"{local_lab.api(a)}experiments/{local_lab.run}", headers=local_lab.headers(a), timeout=30
    )
    assert own.status_code == 404, own.text[:300]
    listed = requests.get(f"{local_lab.api(a)}experiments", headers=local_lab.headers(a), timeout=30)
    assert listed.status_code == 200 and local_lab.run not in listed.text


HUB_API = [
    ("GET", "users/{b}"),
    ("GET", "users/{b}/tokens"),
    ("POST", "users/{b}/tokens"),
    ("POST", "users/{b}/server"),
    ("DELETE", "users/{b}/server"),
    ("DELETE", "users/{b}"),
    ("POST", "users/{b}/activity"),
]


@needs_root
@pytest.mark.parametrize(("method", "path"), HUB_API)
def test_local_hub_api_refuses_a_on_b(local_lab: LocalLab, method: str, path: str) -> None:
    a, b = local_lab.users["a"].pw_name, local_lab.users["b"].pw_name
    reply = requests.request(
        method,
        f"{local_lab.hub.url}/hub/api/{path.format(b=b)}",
        json={},
        headers=local_lab.headers(a),
        timeout=30,
    )
    assert reply.status_code in (403, 404), (method, path, reply.status_code, reply.text[:300])
    assert local_lab.hub.wait_server(b, timeout=5)["servers"][""]["ready"]


@needs_root
@pytest.mark.parametrize("which", ["workspace", "runs", "archive"])
@pytest.mark.parametrize("attempt", ["list", "read", "write"])
def test_local_hub_a_uid_cannot_touch_b_folders(local_lab: LocalLab, which: str, attempt: str) -> None:
    a, b = local_lab.users["a"], local_lab.users["b"].pw_name
    folder = local_lab.folder(b, which)
    assert folder.is_dir()
    argv = {
        "list": ["ls", "-a", str(folder)],
        "read": ["sh", "-c", f"cat {folder}/* {folder}/*/*"],
        "write": ["touch", str(folder / "planted-by-a")],
    }[attempt]
    done = as_user(a, argv)
    assert done.returncode != 0 and "Permission denied" in done.stderr, (attempt, folder, done)
    assert "b-secret" not in done.stdout and not (folder / "planted-by-a").exists()


@needs_root
def test_local_hub_a_uid_cannot_read_b_tensorboard(local_lab: LocalLab) -> None:
    a, b = local_lab.users["a"], local_lab.users["b"].pw_name
    api, headers, hub = local_lab.api(b), local_lab.headers(b), local_lab.hub.url
    started = requests.post(
        api + "tensorboards", json={"experiments": [local_lab.run]}, headers=headers, timeout=60
    )
    assert started.status_code in (200, 201), started.text[:300]
    session = started.json()
    entry = requests.get(hub + session["url"], headers=headers, allow_redirects=False, timeout=60)
    assert entry.status_code == 302, entry.text[:300]
    view = entry.headers["Location"]
    assert requests.get(hub + view + "data/runs", timeout=90).status_code == 200  # B's own way in
    capability = view.rstrip("/").rsplit("/", 1)[1]
    seen = as_user(a, [OTHER_PYTHON, "-c", SNOOP])
    assert seen.returncode == 0 and capability not in seen.stdout
    for port in listening_ports(session["pid"]):
        asked = as_user(a, [OTHER_PYTHON, "-c", ASK, f"http://127.0.0.1:{port}{view}data/runs"])
        assert asked.stdout.startswith("403"), asked.stdout[:300]


# -- per-user namespaces: A's notebook token against B's namespace --------------------------------

KUBE = [
    ("list", "pods"),
    ("get", "pods/log"),
    ("list", "jobs"),
    ("create", "jobs"),
    ("delete", "jobs"),
    ("list", "secrets"),
    ("list", "configmaps"),
    ("list", "persistentvolumeclaims"),
    ("patch", "resourcequotas"),
    ("list", "events"),
    ("create", "serviceaccounts/token"),
]


OWN = {("list", "pods"), ("list", "jobs"), ("list", "events")}  # what A's Role allows at home


@pytest.fixture(scope="module")
def two_namespaces(
    cluster: ControlPlane | RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, str], Path]]:
    from controlplane.objects import create_renamed, delete_namespaces

    from kubelab.spawner.cli import render

    kubeconfig = cluster.write_kubeconfig(tmp_path_factory.mktemp("admin") / "config")
    wanted = ("Namespace", "ServiceAccount", "Role", "RoleBinding", "ResourceQuota", "PersistentVolumeClaim")
    prepared = [o for user in ("alice", "bob") for o in render(user, [], {}) if o["kind"] in wanted]
    _, names = create_renamed(kubeconfig, prepared, ["user-alice", "user-bob"])
    token = cluster.token_for(names["user-alice"], "kubelab-notebook")
    alice = cluster.write_kubeconfig(
        tmp_path_factory.mktemp("alice") / "config", token=token, namespace=names["user-alice"]
    )
    try:
        yield names, alice
    finally:
        delete_namespaces(kubeconfig, *names.values())


def kube_call(api: Any, verb: str, resource: str, namespace: str) -> Any:
    from kubernetes import client

    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "from-alice"},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
            }
        },
    }
    calls: dict[tuple[str, str], Callable[[], Any]] = {
        ("list", "pods"): lambda: core.list_namespaced_pod(namespace),
        ("get", "pods/log"): lambda: core.read_namespaced_pod_log("any", namespace),
        ("list", "jobs"): lambda: batch.list_namespaced_job(namespace),
        ("create", "jobs"): lambda: batch.create_namespaced_job(namespace, manifest(job)),
        ("delete", "jobs"): lambda: batch.delete_collection_namespaced_job(namespace),
        ("list", "secrets"): lambda: core.list_namespaced_secret(namespace),
        ("list", "configmaps"): lambda: core.list_namespaced_config_map(namespace),
        ("list", "persistentvolumeclaims"): lambda: core.list_namespaced_persistent_volume_claim(namespace),
        ("patch", "resourcequotas"): lambda: core.patch_namespaced_resource_quota(
            "kubelab-quota", namespace, {"spec": {"hard": {"requests.nvidia.com/gpu": "64"}}}
        ),
        ("list", "events"): lambda: core.list_namespaced_event(namespace),
        ("create", "serviceaccounts/token"): lambda: core.create_namespaced_service_account_token(
            "kubelab-notebook", namespace, manifest({"spec": {"expirationSeconds": 600}})
        ),
    }
    return calls[(verb, resource)]()


@pytest.mark.cluster
@pytest.mark.parametrize(("verb", "resource"), KUBE)
def test_a_notebook_token_is_refused_in_b_namespace(
    two_namespaces: tuple[dict[str, str], Path], verb: str, resource: str
) -> None:
    from kubernetes import client, config

    names, alice = two_namespaces
    with config.new_client_from_config(str(alice)) as api:
        with pytest.raises(client.ApiException) as refusal:
            kube_call(api, verb, resource, names["user-bob"])
        assert refusal.value.status == 403, refusal.value.body
        if (verb, resource) in OWN:  # the same question in A's own namespace is answered
            kube_call(api, verb, resource, names["user-alice"])
