"""`kubelab hub render`: every object a spawn creates, from the shipped config, without a cluster.

The rendered objects are then created on the real control plane (tests/controlplane), whose API
server validates and admits each: what an admin checks is what the cluster would accept.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane.objects import create_renamed, delete_namespaces
from kubernetes import client, config

from kubelab.spawner.cli import render

REPO = Path(__file__).resolve().parents[2]


def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "hub", "render", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def write_config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(
        f"load_subconfig({str(REPO / 'hub_config' / 'jupyterhub_config.py')!r})\nc = get_config()\n" + extra
    )
    return path


def test_render_prints_every_object_of_a_spawn(kubeconfig: Path) -> None:
    done = kubelab("--user", "alice", "--options", '{"gpus": "1(A100)", "memory": "32Gi"}')
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ResourceQuota",
        "LimitRange",  # the namespace's bounds (security/test_namespace_bounds.py)
        *["NetworkPolicy"] * 6,  # default deny, DNS, notebook, experiments, services, internet (deploy.md)
        "PersistentVolumeClaim",  # one claim for the workspace and the archive (storage_layout.py)
        "Pod",
    ]
    pod = objects[-1]
    assert pod["metadata"]["namespace"] == "user-alice"
    [home] = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert home["metadata"]["name"] == "kubelab-home"
    assert home["spec"]["resources"]["requests"]["storage"] == "150Gi"  # 50Gi and 100Gi
    assert objects[0]["metadata"]["annotations"]["kubelab.io/storage"] == "one-claim"
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    homes = {
        m["mountPath"]: m["subPath"]
        for m in pod["spec"]["containers"][0]["volumeMounts"]
        if volumes[m["name"]].get("persistentVolumeClaim", {}).get("claimName") == "kubelab-home"
    }
    assert homes == {"/mnt/alice": "workspace", "/archives/alice": "archive"}
    assert pod["spec"]["nodeSelector"] == {"gpu-type": "A100"}
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": "2", "memory": "32Gi", "nvidia.com/gpu": "1"}
    role_file = yaml.safe_load_all((REPO / "hub_config" / "rbac" / "notebook-role.yaml").read_text())
    assert (
        objects[2]["rules"] == next(d for d in role_file if d["kind"] == "Role")["rules"]
    )  # loaded, not copied
    assert objects[4]["spec"]["hard"]["requests.nvidia.com/gpu"] == "1"  # public's per-user quota
    created, names = create_renamed(kubeconfig, objects, ["user-alice"])
    try:
        with config.new_client_from_config(str(kubeconfig)) as api:
            pods = client.CoreV1Api(api).list_namespaced_pod(names["user-alice"]).items
        assert [p.metadata and p.metadata.name for p in pods] == ["jupyter-alice"]
    finally:
        delete_namespaces(kubeconfig, names["user-alice"])


def test_trusted_lab_mode_shares_claims_on_per_user_subpaths(tmp_path: Path, kubeconfig: Path) -> None:
    config = write_config(
        tmp_path,
        "c.KubeLabSpawner.trusted_lab = True\nc.KubeLabSpawner.namespace = 'lab'\n"
        "c.JupyterHub.load_groups = {'vision': {'users': [], 'properties': {"
        "'volume_mount': 'kubeflow-user-workspace(pvc):/mnt/;4G(memory):/dev/shm',"
        "'node_selector': 'org=vision'}}}\n",
    )
    alice = render("alice", ["vision"], {"group": "vision"}, config)
    other = render("Alice", [], {}, config)
    assert [o["kind"] for o in alice] == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "PersistentVolumeClaim",
        "PersistentVolumeClaim",
        "Pod",
    ]
    assert {o["metadata"]["namespace"] for o in alice} == {"lab"}
    claims = [o for o in alice if o["kind"] == "PersistentVolumeClaim"]
    assert [c["metadata"]["name"] for c in claims] == ["kubeflow-user-workspace", "kubeflow-archives"]
    assert {c["spec"]["accessModes"][0] for c in claims} == {"ReadWriteMany"}

    def mounts(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {m["mountPath"]: m for m in objects[-1]["spec"]["containers"][0]["volumeMounts"]}

    mine, theirs = mounts(alice), mounts(other)
    assert mine["/mnt/alice"]["subPath"] == "alice" and mine["/archives/alice"]["subPath"] == "alice"
    slug = next(p for p in theirs if p.startswith("/mnt/")).split("/")[-1]
    assert slug != "alice" and theirs[f"/mnt/{slug}"]["subPath"] == slug  # safe slugs never collide
    shm = [v for v in alice[-1]["spec"]["volumes"] if v.get("emptyDir", {}).get("medium") == "Memory"]
    assert shm == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4G"}}]  # the group's size
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}}
    _, names = create_renamed(kubeconfig, [namespace, *alice], ["lab"])
    delete_namespaces(kubeconfig, names["lab"])


def test_render_refusals_print_the_form_sentence(tmp_path: Path) -> None:
    done = kubelab("--user", "bob", "--options", '{"gpus": "-2", "image": "nope:1"}', "-o", "json")
    assert done.returncode == 2 and done.stdout == ""
    assert "gpus: must not be negative, not -2" in done.stderr
    assert "image: unknown image 'nope:1'" in done.stderr
    done = kubelab("--user", "bob", "--group", "nowhere")
    assert done.returncode == 2
    assert "group 'nowhere' is not declared in JupyterHub.load_groups" in done.stderr
    done = kubelab("--user", "bob", "--options", "{gpus")
    assert done.returncode == 2 and "options: is not JSON" in done.stderr
    config = write_config(
        tmp_path,
        "c.JupyterHub.load_groups = {'bad': {'users': [], 'properties': "
        "{'volume_mount': 'a(pvc):/x;b(pvc):/x'}}}\n",
    )
    done = kubelab("--user", "bob", "--group", "bad", "--config", str(config))
    assert done.returncode == 2
    assert (
        "groups.bad.volume_mount: mount path '/x' is used by both volume 'pvc-a' and volume 'pvc-b'"
        in done.stderr
    )


def test_render_json_output_and_missing_config(tmp_path: Path) -> None:
    done = kubelab("--user", "carol", "-o", "json")
    objects = json.loads(done.stdout)
    env = {e["name"]: e["value"] for e in objects[-1]["spec"]["containers"][0]["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "none" and env["KUBELAB_HOME"] == "/mnt/carol/.kubelab"
    done = kubelab("--user", "carol", "--config", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and "missing.py does not exist" in done.stderr


@pytest.mark.parametrize("name", ["jupyterhub_config.py"])
def test_the_shipped_config_loads_in_both_modes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from traitlets.config.loader import PyFileConfigLoader

    for mode, spawner in (
        ("local", "kubelab.spawner.LocalKubeLabSpawner"),
        ("kubernetes", "kubelab.spawner.KubeLabSpawner"),
    ):
        monkeypatch.setenv("KUBELAB_HUB_MODE", mode)
        config = PyFileConfigLoader(name, str(REPO / "hub_config")).load_config()
        assert config.JupyterHub.spawner_class == spawner
        assert config.JupyterHub.allow_named_servers is True
        assert {s["name"] for s in config.JupyterHub.services} == {"idle-culler", "gpu-culler"}
    monkeypatch.setenv("KUBELAB_HUB_MODE", "cloud")
    with pytest.raises(ValueError, match="KUBELAB_HUB_MODE must be 'local' or 'kubernetes', not 'cloud'"):
        PyFileConfigLoader(name, str(REPO / "hub_config")).load_config()


def test_shipped_manifests_are_valid_kubernetes_objects(kubeconfig: Path) -> None:
    files = sorted((REPO / "hub_config").glob("*/*.yaml"))
    assert {f.name for f in files} >= {
        "trusted-lab-pvcs.yaml",
        "user-pvcs.yaml",
        "hub-clusterrole.yaml",
        "notebook-serviceaccount.yaml",
    }
    namespaces = ("kubelab", "jhub", "jhub-alice")
    documents: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces
    ]
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if path.name == "notebook-role.yaml":  # a template the spawner copies per namespace
                document["metadata"]["namespace"] = "kubelab"
            documents.append(document)
    cluster_scoped = [
        d["metadata"]["name"] for d in documents if d["kind"] in ("ClusterRole", "ClusterRoleBinding")
    ]
    _, names = create_renamed(kubeconfig, documents, [*namespaces, *cluster_scoped])
    try:
        with config.new_client_from_config(str(kubeconfig)) as api:
            claims = client.CoreV1Api(api).list_namespaced_persistent_volume_claim(names["kubelab"])
            assert len(claims.items) == 2
            rbac = client.RbacAuthorizationV1Api(api)
            for name in cluster_scoped:
                for delete in (rbac.delete_cluster_role, rbac.delete_cluster_role_binding):
                    with contextlib.suppress(client.ApiException):
                        delete(names[name])
    finally:
        delete_namespaces(kubeconfig, *(names[ns] for ns in namespaces))
    values = yaml.safe_load((REPO / "hub_config" / "values.yaml").read_text())
    assert values["hub"]["config"]["JupyterHub"]["spawner_class"] == "kubelab.spawner.KubeLabSpawner"
    from kubelab.spawner.profiles import Catalog

    Catalog.parse(values["hub"]["config"]["KubeLabSpawner"]["gpu_catalog"])  # the example catalog is valid


def test_a_group_on_another_cluster_is_refused(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        "c.KubeLabSpawner.cluster_context = 'main'\n"
        "c.JupyterHub.load_groups = {'east': {'users': [], 'properties': "
        "{'cluster': 'east-gpus'}}}\n",
    )
    done = kubelab("--user", "ann", "--group", "east", "--config", str(config))
    assert done.returncode == 2
    assert (
        "group: group 'east' runs on cluster 'east-gpus', but this hub spawns on 'main'; use that "
        "cluster's hub"
    ) in done.stderr


def test_kubelab_hub_starts_jupyterhub_and_prints_its_url(tmp_path: Path) -> None:
    import contextlib
    import os
    import signal
    import threading
    import time

    import requests
    from hub_process import free_port, need_proxy

    need_proxy()
    port = free_port()
    env = {
        **os.environ,
        "KUBELAB_HUB_AUTH": "shared-password",
        "KUBELAB_HUB_PASSWORD": "a-lab-password",
        "HOME": str(tmp_path),
        "KUBELAB_HUB_RUN_AS_USERS": "0",
    }
    hub = subprocess.Popen(
        [sys.executable, "-m", "kubelab.cli", "hub", "--port", str(port), "--root", str(tmp_path / "root")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert hub.stdout is not None
    output: list[str] = []  # read as it comes: a full pipe would block the hub's logging, and its exit
    try:
        first = hub.stdout.readline()
        threading.Thread(target=lambda: output.extend(hub.stdout or ()), daemon=True).start()
        assert first.strip() == (
            f"kubelab hub: http://localhost:{port}/  (any user name; password: a-lab-password)"
        )
        deadline = time.monotonic() + 120  # a hub and its proxy start slowly on a loaded machine
        while True:
            try:
                if requests.get(f"http://127.0.0.1:{port}/hub/api/", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if hub.poll() is not None or time.monotonic() > deadline:
                os.killpg(hub.pid, signal.SIGTERM)
                raise AssertionError(
                    f"the hub did not answer (exit {hub.poll()}):\n{''.join(output)[-3000:]}"
                )
            time.sleep(0.3)
        assert (tmp_path / "root" / "jupyterhub.sqlite").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hub.pid, signal.SIGTERM)  # the hub, its proxy and its services
        try:
            hub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(hub.pid, signal.SIGKILL)
            raise AssertionError(
                f"the hub did not end on SIGTERM within 30 s:\n{''.join(output)[-3000:]}"
            ) from None
