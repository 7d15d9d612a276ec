"""docs/deploy.md on the real control plane: what an admin applies, two users' spawns, reconcile.

These use the session fixture `cluster` (kube-apiserver, etcd, controller-manager, scheduler,
KWOK nodes; see tests/conftest.py): `cluster.kubeconfig` (admin), `cluster.token_for(ns, sa)`,
`cluster.write_kubeconfig(path, token=None, namespace=None)`. Each test works in namespaces of
its own (a random suffix), so they share the session's cluster with other tests.

The hub runs with the rights of hub_config/rbac/hub-clusterrole.yaml only (applied from
`kubelab hub render --all`), never as admin: the API server's RBAC and escalation checks prove
the ClusterRole is enough for spawns, Role grants, server-side apply and pruning.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
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
from kubelab_testing import JsonStandIn, manifest, plain
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from kubelab.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[2]
HUB_CONFIG = REPO / "hub_config" / "jupyterhub_config.py"
pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def control_plane(request: pytest.FixtureRequest) -> Any:
    try:
        return request.getfixturevalue("cluster")
    except pytest.FixtureLookupError:
        pytest.skip("needs the real control plane fixture `cluster` (tests/conftest.py)")


@pytest.fixture(scope="module")
def admin(control_plane: Any) -> k8s.ApiClient:
    api: k8s.ApiClient = k8s_config.new_client_from_config(config_file=str(control_plane.kubeconfig))
    return api


def api_server_slice(control_plane: Any, admin: k8s.ApiClient) -> None:
    """What kube-apiserver's endpoint reconciler keeps in a real cluster (the test control plane
    runs with --endpoint-reconciler-type=none): the EndpointSlice of default/kubernetes, from
    which the spawner learns where notebooks reach the API server. The API server listens on
    loopback here, which an EndpointSlice may not name; 172.18.0.3 stands for the node address
    pods would reach it at (only the policies' content depends on it: no CNI runs here)."""
    from urllib.parse import urlsplit

    server = urlsplit(
        yaml.safe_load(Path(control_plane.kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
    )
    body = {
        "metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["172.18.0.3"]}],
        "ports": [{"name": "https", "port": server.port or 443, "protocol": "TCP"}],
    }
    try:
        k8s.DiscoveryV1Api(admin).create_namespaced_endpoint_slice("default", manifest(body))
    except ApiException as exc:
        if exc.status != 409:  # a real cluster has it already
            raise


class Lab:
    """One test's hub: its namespace, the hub's kubeconfig and a config file for the CLI."""

    def __init__(
        self, control_plane: ControlPlane | RealCluster, admin: k8s.ApiClient, directory: Path
    ) -> None:
        self.suffix = secrets.token_hex(3)
        self.hub_namespace = f"jhub-{self.suffix}"
        self.dir = directory
        self.admin = admin
        self.control_plane = control_plane
        core = k8s.CoreV1Api(admin)
        core.create_namespace(manifest({"metadata": {"name": self.hub_namespace}}))
        core.create_namespaced_service_account(self.hub_namespace, manifest({"metadata": {"name": "hub"}}))
        api_server_slice(control_plane, admin)

    def config(self, extra: str = "") -> Path:
        path = self.dir / f"jupyterhub_config_{secrets.token_hex(2)}.py"
        path.write_text(
            f"load_subconfig({str(HUB_CONFIG)!r})\nc = get_config()\n"
            f"c.KubeLabSpawner.hub_namespace = {self.hub_namespace!r}\n"
            f"c.KubeLabSpawner.user_namespace_template = 'kl-{self.suffix}-{{username}}'\n"
            "c.KubeLabSpawner.check_availability = False\n"
            "c.KubeLabSpawner.start_timeout = 120\n" + extra
        )
        return path

    def hub_kubeconfig(self) -> Path:
        token = self.control_plane.token_for(self.hub_namespace, "hub")
        return self.control_plane.write_kubeconfig(
            self.dir / "hub-kubeconfig", token=token, namespace=self.hub_namespace
        )

    def user_namespace(self, user: str) -> str:
        return f"kl-{self.suffix}-{user}"


@pytest.fixture
def lab(control_plane: Any, admin: k8s.ApiClient, tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(control_plane, admin, tmp_path)
    yield lab
    core = k8s.CoreV1Api(admin)
    for ns in plain(core.list_namespace(label_selector="kubelab.io/user"))["items"]:
        if ns["metadata"]["name"].startswith(f"kl-{lab.suffix}-"):
            core.delete_namespace(ns["metadata"]["name"])
    core.delete_namespace(lab.hub_namespace)


def kubelab(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ}
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "hub", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )


def render_all(lab: Lab) -> list[dict[str, Any]]:
    done = kubelab("render", "--all", "--hub-namespace", lab.hub_namespace)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def apply_objects(
    kubeconfig: Path, objects: list[dict[str, Any]], dry_run: bool = False
) -> list[dict[str, Any]]:
    """Server-side apply as kubelab does (kubelab.spawner.apply), with the given credentials."""
    from kubernetes_asyncio import config as async_config
    from kubernetes_asyncio.client import ApiClient, Configuration

    from kubelab.spawner.apply import Applier

    async def go() -> list[dict[str, Any]]:
        configuration = Configuration()
        await async_config.load_kube_config_from_dict(
            yaml.safe_load(Path(kubeconfig).read_text()), client_configuration=configuration
        )
        async with ApiClient(configuration) as api:
            applier = Applier(api)
            return [await applier.apply(o, dry_run=dry_run) for o in objects]

    return asyncio.run(go())


def install(lab: Lab, admin_kubeconfig: Path) -> None:
    """docs/deploy.md steps 2-3 (the chart itself is not installed here: no helm, no images)."""
    apply_objects(admin_kubeconfig, render_all(lab))


def test_render_all_is_accepted_by_a_dry_run_and_then_applied(lab: Lab, control_plane: Any) -> None:
    objects = render_all(lab)
    results = apply_objects(control_plane.kubeconfig, objects, dry_run=True)
    assert [(r["kind"], r["metadata"]["name"]) for r in results] == [
        (o["kind"], o["metadata"]["name"]) for o in objects
    ]
    rbac = k8s.RbacAuthorizationV1Api(lab.admin)
    with pytest.raises(ApiException) as missing:  # a dry run stores nothing
        k8s.CoreV1Api(lab.admin).read_namespaced_config_map("kubelab-notebook-role", lab.hub_namespace)
    assert missing.value.status == 404
    apply_objects(control_plane.kubeconfig, objects)
    role = plain(rbac.read_cluster_role("kubelab-hub"))
    assert role["metadata"]["managedFields"][0]["manager"] == "kubelab"
    binding = plain(rbac.read_cluster_role_binding("kubelab-hub"))
    assert [(s["name"], s["namespace"]) for s in binding["subjects"]] == [("hub", lab.hub_namespace)]


def kubectl(control_plane: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    import os

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    return subprocess.run(
        ["kubectl", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)},
    )


def test_the_guides_install_and_uninstall_commands(lab: Lab, control_plane: Any) -> None:
    """docs/deploy.md steps 2 and 6 as written (the namespace is this test's own)."""
    admin_file = lab.dir / "kubelab-admin.yaml"
    done = kubelab("render", "--all", "--hub-namespace", lab.hub_namespace)
    admin_file.write_text(done.stdout)
    apply = ["apply", "--server-side", "--field-manager=kubelab"]
    done = kubectl(control_plane, *apply, "--dry-run=server", "-f", str(admin_file))
    assert done.returncode == 0, done.stderr
    assert (
        "clusterrole.rbac.authorization.k8s.io/kubelab-hub serverside-applied (server dry run)" in done.stdout
    )
    done = kubectl(control_plane, *apply, "-f", str(admin_file))
    assert done.returncode == 0, done.stderr
    done = kubectl(
        control_plane,
        "auth",
        "can-i",
        "patch",
        "networkpolicies",
        "-n",
        "any-namespace",
        f"--as=system:serviceaccount:{lab.hub_namespace}:hub",
    )
    assert done.stdout.strip() == "yes", done.stderr
    done = kubectl(
        control_plane,
        "auth",
        "can-i",
        "patch",
        "persistentvolumeclaims",
        "-n",
        "any-namespace",
        f"--as=system:serviceaccount:{lab.hub_namespace}:hub",
    )
    assert done.stdout.strip() == "no"  # claims are only ever created
    # the upgrade's pipe form
    done = kubectl(
        control_plane,
        *apply,
        "-f",
        "-",
        stdin=kubelab("render", "--all", "--hub-namespace", lab.hub_namespace).stdout,
    )
    assert done.returncode == 0, done.stderr
    done = kubectl(control_plane, "delete", "-f", str(admin_file))
    assert done.returncode == 0, done.stderr
    with pytest.raises(ApiException) as gone:
        k8s.RbacAuthorizationV1Api(lab.admin).read_cluster_role("kubelab-hub")
    assert gone.value.status == 404


def spawn(config: Path, kubeconfig: Path, users: list[str], options: dict[str, Any]) -> list[str]:
    """KubeLabSpawner.start() (then stop()) for each user with the hub's credentials, in one
    event loop as in a hub (KubeSpawner's pod reflector is per loop); their namespaces."""
    from kubelab.spawner.cli import _OfflineKube, load_config
    from kubelab.spawner.kube import KubeLabSpawner
    from kubelab.spawner.offline import offline_spawner

    async def go() -> list[str]:
        namespaces = []
        try:
            for user in users:
                spawner = await offline_spawner(load_config(config), user, [])
                spawner.user_options = options
                spawner.api_token = secrets.token_hex(8)
                await spawner.start()
                await spawner.stop()
                namespaces.append(spawner.namespace)
        finally:  # the reflectors belong to this loop: the next test's loop starts its own
            await KubeLabSpawner._stop_all_reflectors()
        return namespaces

    with _OfflineKube(str(kubeconfig)):
        return asyncio.run(go())


def objects_in(admin: k8s.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    """Every object kubelab keeps in a namespace, by `Kind/name`, as the API server stores it."""
    found = {}
    core, rbac, net = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin), k8s.NetworkingV1Api(admin)
    for kind, lister in (
        ("ServiceAccount", core.list_namespaced_service_account),
        ("Role", rbac.list_namespaced_role),
        ("RoleBinding", rbac.list_namespaced_role_binding),
        ("ResourceQuota", core.list_namespaced_resource_quota),
        ("LimitRange", core.list_namespaced_limit_range),
        ("NetworkPolicy", net.list_namespaced_network_policy),
        ("PersistentVolumeClaim", core.list_namespaced_persistent_volume_claim),
    ):
        for item in lister(namespace).items:
            data = admin.sanitize_for_serialization(item)
            if kind == "ServiceAccount" and data["metadata"]["name"] == "default":
                continue
            found[f"{kind}/{data['metadata']['name']}"] = data
    return found


def expected_objects(lab: Lab, config: Path, user: str, api_server: Any) -> dict[str, dict[str, Any]]:
    from kubelab.spawner.cli import _OfflineKube, load_config
    from kubelab.spawner.offline import offline_spawner

    async def go() -> list[dict[str, Any]]:
        spawner = await offline_spawner(load_config(config), user, [])
        return spawner.namespace_objects(spawner.plan()[1], api_server)

    with _OfflineKube():
        built = asyncio.run(go())
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in built if o["kind"] != "Namespace"}


def assert_contains(stored: Any, wanted: Any, where: str) -> None:
    """`wanted` (what kubelab built) is in `stored` (what the API server keeps, with defaults)."""
    if isinstance(wanted, dict):
        for key, value in wanted.items():
            assert key in stored, f"{where}.{key} missing"
            assert_contains(stored[key], value, f"{where}.{key}")
    elif isinstance(wanted, list):
        assert len(stored) == len(wanted), f"{where}: {stored} != {wanted}"
        for i, (s, w) in enumerate(zip(stored, wanted, strict=True)):
            assert_contains(s, w, f"{where}[{i}]")
    else:
        assert stored == wanted, f"{where}: {stored!r} != {wanted!r}"


def test_two_users_spawn_and_get_every_documented_object(lab: Lab, control_plane: Any) -> None:
    from kubelab.spawner.network import POLICY_NAMES, ApiServer

    install(lab, control_plane.kubeconfig)
    config = lab.config()
    hub = lab.hub_kubeconfig()
    slices = k8s.DiscoveryV1Api(lab.admin).list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes"
    )
    api_server = ApiServer.from_endpoint_slices(lab.admin.sanitize_for_serialization(slices)["items"])
    assert spawn(config, hub, ["alice", "bob"], {}) == [lab.user_namespace(u) for u in ("alice", "bob")]
    for user in ("alice", "bob"):
        namespace = lab.user_namespace(user)
        stored = objects_in(lab.admin, namespace)
        wanted = expected_objects(lab, config, user, api_server)
        assert sorted(stored) == sorted(wanted)
        assert sorted(k.split("/")[1] for k in stored if k.startswith("NetworkPolicy/")) == sorted(
            POLICY_NAMES
        )
        for key, obj in wanted.items():
            assert_contains(
                stored[key],
                {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")},
                key,
            )
            assert stored[key]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubelab"
        ns = plain(k8s.CoreV1Api(lab.admin).read_namespace(namespace))
        assert ns["metadata"]["labels"]["kubelab.io/user"] == user
        assert ns["metadata"]["annotations"]["kubelab.io/group"] == "public"
    if shutil.which("kubectl"):  # docs/deploy.md step 4's checks
        done = kubectl(
            control_plane,
            "get",
            "namespaces",
            "-l",
            "app.kubernetes.io/managed-by=kubelab,kubelab.io/user",
            "-o",
            "name",
        )
        assert {f"namespace/{lab.user_namespace(u)}" for u in ("alice", "bob")} <= set(done.stdout.split())
        done = kubectl(
            control_plane,
            "-n",
            lab.user_namespace("alice"),
            "get",
            "serviceaccounts,roles,rolebindings,resourcequotas,limitranges,networkpolicies,"
            "persistentvolumeclaims",
            "-o",
            "name",
        )
        assert (
            len(done.stdout.split()) == len(objects_in(lab.admin, lab.user_namespace("alice"))) + 1
        )  # + default
    # the notebook's account sees its own namespace only
    token = control_plane.token_for(lab.user_namespace("alice"), "kubelab-notebook")
    alice = k8s_config.new_client_from_config(
        config_file=str(control_plane.write_kubeconfig(lab.dir / "alice", token=token))
    )
    k8s.CoreV1Api(alice).list_namespaced_pod(lab.user_namespace("alice"))
    with pytest.raises(ApiException) as refused:
        k8s.CoreV1Api(alice).list_namespaced_pod(lab.user_namespace("bob"))
    assert refused.value.status == 403
    with pytest.raises(ApiException) as refused:  # nor can it open its own namespace's policies
        k8s.NetworkingV1Api(alice).create_namespaced_network_policy(
            lab.user_namespace("alice"), manifest({"metadata": {"name": "open"}, "spec": {"podSelector": {}}})
        )
    assert refused.value.status == 403


def previous_version_namespace(lab: Lab, user: str) -> str:
    """A namespace as the previous kubelab left it: created with POST (no server-side apply),
    an older Role (one rule more, one less), a quota with a CPU line since dropped, no
    NetworkPolicy, no group annotation, and claims holding data (a label marks them)."""
    namespace = lab.user_namespace(user)
    core, rbac = k8s.CoreV1Api(lab.admin), k8s.RbacAuthorizationV1Api(lab.admin)
    core.create_namespace(
        manifest(
            {
                "metadata": {
                    "name": namespace,
                    "labels": {"kubelab.io/user": user, "app.kubernetes.io/managed-by": "kubelab"},
                }
            }
        )
    )
    managed = {"app.kubernetes.io/managed-by": "kubelab"}
    core.create_namespaced_service_account(
        namespace, manifest({"metadata": {"name": "kubelab-notebook", "labels": managed}})
    )
    rbac.create_namespaced_role(
        namespace,
        manifest(
            {
                "metadata": {"name": "kubelab-notebook", "labels": managed},
                "rules": [
                    {
                        "apiGroups": ["batch"],
                        "resources": ["jobs"],
                        "verbs": ["create", "get", "list", "watch", "delete"],
                    },
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                ],
            }
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        manifest(
            {
                "metadata": {"name": "kubelab-notebook", "labels": managed},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "kubelab-notebook",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "kubelab-notebook", "namespace": namespace}],
            }
        ),
    )
    core.create_namespaced_resource_quota(
        namespace,
        manifest(
            {
                "metadata": {"name": "kubelab-quota", "labels": managed},
                "spec": {"hard": {"requests.nvidia.com/gpu": "4", "requests.cpu": "8"}},
            }
        ),
    )
    for name, size in (("kubelab-workspace", "10Gi"), ("kubelab-archive", "20Gi")):
        core.create_namespaced_persistent_volume_claim(
            namespace,
            manifest(
                {
                    "metadata": {"name": name, "labels": {**managed, "data": "keep"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
                }
            ),
        )
    return namespace


def reconcile(lab: Lab, config: Path, kubeconfig: Path) -> dict[str, dict[str, Any]]:
    done = kubelab("reconcile", "--config", str(config), "--kubeconfig", str(kubeconfig))
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    return {r["namespace"]: r for r in reports if r["namespace"].startswith(f"kl-{lab.suffix}-")}


def test_reconcile_brings_a_previous_versions_namespace_up_to_date(lab: Lab, control_plane: Any) -> None:
    install(lab, control_plane.kubeconfig)
    namespace = previous_version_namespace(lab, "carol")
    core, rbac = k8s.CoreV1Api(lab.admin), k8s.RbacAuthorizationV1Api(lab.admin)
    claims_before = {
        c["metadata"]["name"]: (c["metadata"]["uid"], c["spec"]["resources"]["requests"]["storage"])
        for c in plain(core.list_namespaced_persistent_volume_claim(namespace))["items"]
    }
    config, hub = lab.config(), lab.hub_kubeconfig()

    first = reconcile(lab, config, hub)[namespace]
    assert first["group"] == "public"
    assert sorted(first["migrated"]) == [
        "ResourceQuota/kubelab-quota",
        "Role/kubelab-notebook",
        "RoleBinding/kubelab-notebook",
    ]
    assert "LimitRange/kubelab-limits" in first["applied"]
    assert first["created"] == [] and first["deleted"] == []  # the claims were there
    # its two claims are kept as they were, and the namespace records that (storage_layout.py)
    assert (
        plain(core.read_namespace(namespace))["metadata"]["annotations"]["kubelab.io/storage"] == "two-claims"
    )
    role_file = next(
        d
        for d in yaml.safe_load_all((REPO / "hub_config/rbac/notebook-role.yaml").read_text())
        if d["kind"] == "Role"
    )
    role = lab.admin.sanitize_for_serialization(rbac.read_namespaced_role("kubelab-notebook", namespace))
    assert role["rules"] == role_file["rules"]
    assert [(m["manager"], m["operation"]) for m in role["metadata"]["managedFields"]] == [
        ("kubelab", "Apply")
    ]
    hard = plain(core.read_namespaced_resource_quota("kubelab-quota", namespace))["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "1"  # public's quota
    assert "requests.cpu" not in hard  # the CPU line is gone
    assert hard["count/serviceaccounts"] == "20"  # the namespace's bounds came
    assert plain(core.read_namespace(namespace))["metadata"]["labels"]["kubelab.io/hub"] == lab.hub_namespace
    limits = plain(core.read_namespaced_limit_range("kubelab-limits", namespace))["spec"]["limits"]
    assert limits[0]["min"]["cpu"] == "50m"
    policies = plain(k8s.NetworkingV1Api(lab.admin).list_namespaced_network_policy(namespace))["items"]
    assert len(policies) == 6  # deny, DNS, notebook, experiments, services, internet
    claims_after = {
        c["metadata"]["name"]: (c["metadata"]["uid"], c["spec"]["resources"]["requests"]["storage"])
        for c in plain(core.list_namespaced_persistent_volume_claim(namespace))["items"]
    }
    assert claims_after == claims_before  # the same claims, untouched (not the configured 50Gi)

    again = reconcile(lab, config, hub)[namespace]
    assert again["migrated"] == [] and again["deleted"] == [] and again["created"] == []

    # a later configuration: no per-user quota, no NetworkPolicies: the GPU line and the
    # policies go, the namespace's bounds and the claims stay
    later = lab.config(
        "c.JupyterHub.load_groups = {'public': {'users': [], 'properties': {}}}\n"
        "c.KubeLabSpawner.network_policy = False\n"
    )
    last = reconcile(lab, later, hub)[namespace]
    assert sorted(last["deleted"]) == sorted(f"NetworkPolicy/{p['metadata']['name']}" for p in policies)
    assert (
        "requests.nvidia.com/gpu"
        not in plain(core.read_namespaced_resource_quota("kubelab-quota", namespace))["spec"]["hard"]
    )
    assert k8s.NetworkingV1Api(lab.admin).list_namespaced_network_policy(namespace).items == []
    assert {
        c["metadata"]["name"] for c in plain(core.list_namespaced_persistent_volume_claim(namespace))["items"]
    } == {
        "kubelab-workspace",
        "kubelab-archive",
    }


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} in {timeout:g} s")
        time.sleep(0.1)


def test_reconcile_at_a_full_storage_quota_creates_no_claim_that_exists(lab: Lab, control_plane: Any) -> None:
    """A user whose claims fill their namespace's storage quota, reconciled again (an upgrade):
    a claim that exists is not created again. The quota's admission charges a create before the
    duplicate is refused (the charge stays until the quota controller's next full resync), so
    such a create is refused as `exceeded quota` at a full quota, and repeated reconciles fill
    a quota that is not (the whole-suite failure of the test above, at 330Gi of 350Gi)."""
    install(lab, control_plane.kubeconfig)
    namespace = previous_version_namespace(lab, "erin")
    core = k8s.CoreV1Api(lab.admin)
    config, hub = lab.config(), lab.hub_kubeconfig()
    assert "error" not in reconcile(lab, config, hub)[namespace]

    def used() -> float | None:
        status = plain(core.read_namespaced_resource_quota("kubelab-quota", namespace)).get("status") or {}
        counted = (status.get("used") or {}).get("requests.storage")
        return None if counted is None else float(parse_quantity(counted))

    hard = plain(core.read_namespaced_resource_quota("kubelab-quota", namespace))["spec"]["hard"]
    limit = parse_quantity(hard["requests.storage"])
    wait_for(
        lambda: used() == parse_quantity("30Gi"),
        what="the quota controller's count of the two claims (10Gi, 20Gi)",
    )
    rest = int(limit - parse_quantity("30Gi"))
    core.create_namespaced_persistent_volume_claim(  # the user's own data claim, up to the limit
        namespace,
        manifest(
            {
                "metadata": {"name": "datasets"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": str(rest)}}},
            }
        ),
    )
    wait_for(lambda: used() == limit, what="a full quota")

    again = reconcile(lab, config, hub)[namespace]
    assert "error" not in again, again
    assert again["created"] == []
    assert used() == limit  # nothing charged for claims that were not made


def test_hub_metrics_count_the_clusters_gpus_and_experiments(lab: Lab, control_plane: Any) -> None:
    """A real JupyterHub (kubernetes mode, the hub's credentials) serves kubelab's families on
    /hub/metrics once its availability watch runs; an experiment pod shows up in them, and in the
    GPU-hours counter, counted against the user and group of its namespace, not those its labels
    claim (issue 27, finding 9: any Job's pods may carry any labels); so is its mean GPU
    utilisation from a recorded Prometheus answer (DCGM series by pod)."""

    from hub_process import Hub, hub_samples

    install(lab, control_plane.kubeconfig)
    namespace = lab.user_namespace("dora")
    core = k8s.CoreV1Api(lab.admin)
    core.create_namespace(
        manifest(
            {
                "metadata": {
                    "name": namespace,
                    "labels": {"app.kubernetes.io/managed-by": "kubelab", "kubelab.io/user": "dora"},
                    "annotations": {"kubelab.io/group": "public"},
                }
            }
        )
    )
    forged = {"kubelab.io/user": "bob", "kubelab.io/group": "vision"}
    core.create_namespaced_pod(
        namespace,
        manifest(
            {
                "metadata": {
                    "name": "run-0",
                    "labels": {
                        "app.kubernetes.io/name": "kubelab-experiment",
                        "kubelab.io/experiment": "r1",
                        **forged,
                    },
                },
                "spec": {
                    "nodeSelector": {"gpu-type": "T4"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "trial",
                            "image": "python:3.11-slim",
                            "resources": {
                                "requests": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": "1"},
                                "limits": {"nvidia.com/gpu": "1"},
                            },
                        }
                    ],
                },
            }
        ),
    )
    overrides = (
        f"c.KubeLabSpawner.hub_namespace = {lab.hub_namespace!r}\n"
        "c.JupyterHub.authenticate_prometheus = False\n"
    )
    (lab.dir / "hub").mkdir()
    # Prometheus's recorded answer: two GPUs' DCGM series for dora's pod (80% and 40.5%), and a
    # pod the hub does not see (it ended)
    recorded = json.loads((Path(__file__).parent / "fixtures" / "prometheus_dcgm_util.json").read_text())
    for series in recorded["data"]["result"][:2]:
        series["metric"].update(exported_namespace=namespace, exported_pod="run-0")
    with (
        JsonStandIn(lambda path: recorded) as prometheus,
        Hub(
            lab.dir / "hub",
            overrides,
            {
                "KUBELAB_HUB_MODE": "kubernetes",
                "KUBECONFIG": str(lab.hub_kubeconfig()),
                "KUBELAB_PROMETHEUS_URL": prometheus.url,
            },
        ) as hub,
    ):
        session = hub.login("dora")
        assert session.get(f"{hub.url}/hub/spawn/dora", timeout=60).status_code == 200  # starts the watch
        samples = hub_samples(
            hub,
            lambda samples: any(
                name == "jupyterhub_kubelab_gpus_allocated" and dict(labels).get("user") == "dora"
                for name, labels in samples
            ),
        )
        assert {
            ("jupyterhub_kubelab_gpus_total", (("gpu_type", t),)) for t in ("T4", "V100", "A100", "H100")
        } <= set(samples), hub.log_tail()
        states = {
            dict(labels)["state"]
            for name, labels in samples
            if name == "jupyterhub_kubelab_experiments" and dict(labels).get("user") == "dora"
        }
        assert states and states <= {"running", "queued"}, samples
        allocated = (("gpu_type", "T4"), ("group", "public"), ("user", "dora"))
        assert samples[("jupyterhub_kubelab_gpus_allocated", allocated)] == 1, samples
        # Her GPU-hours grow from one scrape to the next, against her namespace's owner too.
        hours = ("jupyterhub_kubelab_gpu_hours_total", allocated)
        samples = hub_samples(hub, lambda samples: samples.get(hours, 0) > 0)
        assert 0 < samples.get(hours, 0) < 1, samples  # one GPU for well under an hour
        # Her pod's mean GPU utilisation from DCGM, read in a thread: a later scrape has it.
        busy = ("jupyterhub_kubelab_gpu_utilisation_percent", (("group", "public"), ("user", "dora")))
        samples = hub_samples(hub, lambda samples: busy in samples)
        assert samples.get(busy) == 60.25, samples
        utilisation = [key for key in samples if key[0] == busy[0]]
        assert utilisation == [busy], utilisation  # nothing for the pod's forged owner, nor the ended pod
        assert prometheus.paths, "the hub never asked Prometheus"
        claimed = [
            labels for _, labels in samples if ("user", "bob") in labels or ("group", "vision") in labels
        ]
        assert claimed == [], claimed


def test_the_next_spawn_brings_a_previous_versions_namespace_up_to_date(lab: Lab, control_plane: Any) -> None:
    """Without `reconcile`: a user of the previous version starts a server after the upgrade."""
    install(lab, control_plane.kubeconfig)
    namespace = previous_version_namespace(lab, "dave")
    core, rbac = k8s.CoreV1Api(lab.admin), k8s.RbacAuthorizationV1Api(lab.admin)
    claims_before = {
        c["metadata"]["name"]: c["metadata"]["uid"]
        for c in plain(core.list_namespaced_persistent_volume_claim(namespace))["items"]
    }
    assert spawn(lab.config(), lab.hub_kubeconfig(), ["dave"], {}) == [namespace]
    role_file = next(
        d
        for d in yaml.safe_load_all((REPO / "hub_config/rbac/notebook-role.yaml").read_text())
        if d["kind"] == "Role"
    )
    assert (
        lab.admin.sanitize_for_serialization(rbac.read_namespaced_role("kubelab-notebook", namespace))[
            "rules"
        ]
        == role_file["rules"]
    )
    hard = plain(core.read_namespaced_resource_quota("kubelab-quota", namespace))["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "1" and "requests.cpu" not in hard
    assert hard["pods"] == "50"  # and the namespace's bounds
    assert len(k8s.NetworkingV1Api(lab.admin).list_namespaced_network_policy(namespace).items) == 6
    assert plain(core.read_namespace(namespace))["metadata"]["annotations"]["kubelab.io/group"] == "public"
    assert {
        c["metadata"]["name"]: c["metadata"]["uid"]
        for c in plain(core.list_namespaced_persistent_volume_claim(namespace))["items"]
    } == (claims_before)
