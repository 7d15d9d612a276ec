"""A schedule on the real control plane (tests/controlplane), created, paused and removed with
the notebook's own token through `kubelab schedule`: the kube-controller-manager's CronJob
controller fires it, its pod passes the namespace's `restricted` Pod Security level and runs
on a simulated node, and `kubelab schedule ls` shows the Job. The same token cannot escalate
through the Role and RoleBinding rights scheduling needs: the API server refuses to grant
what the notebook's Role lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane
from controlplane.fixtures import RealCluster
from controlplane.objects import create_renamed, delete_namespaces
from kubelab_testing import manifest, plain
from kubernetes import client, config

from kubelab.backends.kubernetes import cronjob
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.spawner.cli import render

pytestmark = pytest.mark.cluster
NOTEBOOK_ACCOUNT = "kubelab-notebook"
NODE_LABEL = "lab.example.org/schedules"


@pytest.fixture
def user_namespace(kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A namespace as the spawner prepares it (its Role from notebook-role.yaml), enforcing the
    `restricted` Pod Security level."""
    monkeypatch.delenv("KUBELAB_HUB_AUTH", raising=False)
    prepared = [
        o
        for o in render("alice", [], {})
        if o["kind"] in ("Namespace", "ServiceAccount", "Role", "RoleBinding")
    ]
    for obj in prepared:
        if obj["kind"] == "Namespace":
            obj["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "restricted"
    _, names = create_renamed(kubeconfig, prepared, ["user-alice"])
    yield names["user-alice"]
    delete_namespaces(kubeconfig, names["user-alice"])


@pytest.fixture
def admin(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(str(kubeconfig)) as api:
        yield api


def notebook_kubeconfig(cluster: ControlPlane | RealCluster, namespace: str, path: Path) -> Path:
    return cluster.write_kubeconfig(
        path, token=cluster.token_for(namespace, NOTEBOOK_ACCOUNT), namespace=namespace
    )


def test_a_schedule_is_a_cronjob_that_fires_pauses_and_goes(
    cluster: ControlPlane | RealCluster,
    simulated_cluster: ControlPlane,
    make_node: Callable[..., str],
    admin: client.ApiClient,
    user_namespace: Any,
    tmp_path: Path,
) -> None:
    namespace = user_namespace
    make_node("sched", labels={NODE_LABEL: namespace})
    nb = NotebookEnv(
        namespace=namespace,
        image="registry.example.org/lab/notebook:1",
        user="alice",
        home=str(tmp_path / "home"),
        node_selector={NODE_LABEL: namespace},
    )
    env = {
        **os.environ,
        **cronjob.notebook_environ(nb),
        "KUBELAB_MACHINE_DIR": str(tmp_path / "machine"),
        "KUBECONFIG": str(notebook_kubeconfig(cluster, namespace, tmp_path / "notebook")),
    }
    work = tmp_path / "work"
    work.mkdir()
    (work / "tick.yml").write_text(
        yaml.safe_dump(
            {
                "name": "tick",
                "command": ["python", "-c", "print('tick')"],
                "schedule": {"cron": "* * * * *", "timezone": "Europe/Berlin", "concurrency": "replace"},
            }
        )
    )

    def kubelab(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "kubelab.cli", "schedule", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if "-o" in args else done.stdout

    made = kubelab("add", "-f", "tick.yml", "-o", "json")
    assert made["fired_by"] == "cronjob" and made["cluster"]["suspend"] is False
    batch, core, rbac = (
        client.BatchV1Api(admin),
        client.CoreV1Api(admin),
        client.RbacAuthorizationV1Api(admin),
    )
    name, account = cronjob.cronjob_name("tick", made["id"]), cronjob.account(made["id"])
    job = plain(batch.read_namespaced_cron_job(name, namespace))["spec"]
    assert (job["schedule"], job["timeZone"], job["concurrencyPolicy"]) == (
        "* * * * *",
        "Europe/Berlin",
        "Replace",
    )
    assert job["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == account
    role = plain(rbac.read_namespaced_role(account, namespace))
    assert {r for rule in role["rules"] for r in rule["resources"]} == {
        "jobs",
        "services",
        "pods",
        "pods/log",
        "events",
    }
    assert plain(rbac.read_namespaced_role_binding(account, namespace))["subjects"][0]["name"] == account
    assert not (tmp_path / "home" / "schedules" / "scheduler.pid").exists()  # no local scheduler for it

    # The controller fires on the next minute boundary (it looks every 10 s).
    selector = f"kubelab.io/schedule={made['id']}"
    deadline = time.monotonic() + 150
    while not (
        pods := [
            p
            for p in plain(core.list_namespaced_pod(namespace, label_selector=selector))["items"]
            if p["status"]["phase"] == "Running"
        ]
    ):
        assert time.monotonic() < deadline, [e.message for e in core.list_namespaced_event(namespace).items]
        time.sleep(1)
    assert pods[0]["spec"]["containers"][0]["command"] == ["kubelab", "schedule", "fire", made["id"]]
    assert pods[0]["spec"]["serviceAccountName"] == account  # admitted under `restricted`
    simulated_cluster.end_pod(namespace, pods[0]["metadata"]["name"], "Succeeded")
    while not (runs := kubelab("ls", "-o", "json")["items"][0]["cluster"]["runs"]) or (
        runs[-1]["state"] != "Succeeded"
    ):
        assert time.monotonic() < deadline + 60, runs
        time.sleep(0.5)
    assert runs[-1]["job"] == pods[0]["metadata"]["labels"]["job-name"]
    assert f"Succeeded job/{runs[-1]['job']}" in kubelab("ls")

    assert kubelab("pause", made["id"], "-o", "json")["paused"] is True
    assert batch.read_namespaced_cron_job(name, namespace).spec.suspend is True
    assert kubelab("resume", made["id"], "-o", "json")["paused"] is False
    assert batch.read_namespaced_cron_job(name, namespace).spec.suspend is False

    kubelab("rm", made["id"])
    for read in (
        batch.read_namespaced_cron_job,
        rbac.read_namespaced_role_binding,
        rbac.read_namespaced_role,
        core.read_namespaced_service_account,
    ):
        with pytest.raises(client.ApiException) as gone:
            read(name if read == batch.read_namespaced_cron_job else account, namespace)
        assert gone.value.status == 404
    while batch.list_namespaced_job(namespace, label_selector=selector).items:  # the garbage collector
        assert time.monotonic() < deadline + 120, "the CronJob's Jobs outlived it"
        time.sleep(0.5)
    assert kubelab("ls", "-o", "json")["items"] == []


ESCALATIONS = {
    "secrets": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
    "pods/exec": {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    "bind": {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles"],
        "verbs": ["bind", "escalate"],
    },
}


def test_a_notebook_token_cannot_escalate_through_roles_and_bindings(
    cluster: ControlPlane | RealCluster, admin: client.ApiClient, user_namespace: Any, tmp_path: Path
) -> None:
    namespace = user_namespace
    rbac_admin = client.RbacAuthorizationV1Api(admin)
    rbac_admin.create_namespaced_role(
        namespace, manifest({"metadata": {"name": "secret-reader"}, "rules": [ESCALATIONS["secrets"]]})
    )
    subject = [{"kind": "ServiceAccount", "name": NOTEBOOK_ACCOUNT, "namespace": namespace}]

    def binding(name: str, kind: str, role: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        }

    with config.new_client_from_config(str(notebook_kubeconfig(cluster, namespace, tmp_path / "nb"))) as api:
        rbac = client.RbacAuthorizationV1Api(api)
        # What scheduling needs is allowed: a Role within the notebook's rights, bound.
        rbac.create_namespaced_role(
            namespace, manifest({"metadata": {"name": "within"}, "rules": cronjob.RULES})
        )
        rbac.create_namespaced_role_binding(namespace, manifest(binding("within", "Role", "within")))
        refused: dict[str, str] = {}
        for name, rule in ESCALATIONS.items():
            with pytest.raises(client.ApiException) as caught:
                rbac.create_namespaced_role(
                    namespace, manifest({"metadata": {"name": name.replace("/", "-")}, "rules": [rule]})
                )
            refused[f"Role granting {name}"] = str(caught.value.body)
        for kind, role in (
            ("Role", "secret-reader"),
            ("ClusterRole", "admin"),
            ("ClusterRole", "cluster-admin"),
        ):
            with pytest.raises(client.ApiException) as caught:
                rbac.create_namespaced_role_binding(namespace, manifest(binding(f"to-{role}", kind, role)))
            refused[f"binding {kind} {role}"] = str(caught.value.body)
    assert len(refused) == 6
    for what, body in refused.items():
        assert json.loads(body)["code"] == 403, what
        assert "attempting to grant RBAC permissions not currently held" in body or "escalat" in body, body
    assert sorted(
        r["metadata"]["name"] for r in plain(rbac_admin.list_namespaced_role_binding(namespace))["items"]
    ) == [
        "kubelab-notebook",
        "within",
    ]
