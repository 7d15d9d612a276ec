# ruff: noqa: F811 - pytest fixtures imported from test_deploy_cluster are named as parameters
"""Spawns at scale on the real control plane: per-user setup paid once, claims that bind before
their pod, and a storm of busy answers that leaves every user able to spawn.

The hub talks to the API server through the fault proxy (tests/controlplane/faults.py), which
sees every request: that is how a test counts what a spawn asked of the API server, and how it
makes the API server answer 429 (with Retry-After) and 5xx. The hub runs with the rights of
hub_config/rbac/hub-clusterrole.yaml only, as in test_deploy_cluster.py, whose fixtures it uses.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import manifest, plain
from kubernetes import client as k8s
from serving_support import poll
from test_deploy_cluster import (  # noqa: F401 - fixtures
    Lab,
    admin,
    control_plane,
    install,
    lab,
    objects_in,
    reconcile,
)

from kubelab.spawner.apply import BUNDLE_HASH

pytestmark = pytest.mark.cluster
BUNDLE = {
    "namespaces",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "resourcequotas",
    "networkpolicies",
    "persistentvolumeclaims",
}
WRITES = {"create", "update", "patch", "delete"}


@pytest.fixture
def proxy(control_plane: Any) -> Iterator[Any]:
    if not hasattr(control_plane, "fault_proxy"):
        pytest.skip("needs the loopback control plane's fault proxy")
    faults = control_plane.fault_proxy()
    yield faults
    faults.close()


def proxied_hub(lab: Lab, proxy: Any) -> Path:
    """The hub's kubeconfig (its ServiceAccount's token), through the fault proxy."""
    token = lab.control_plane.token_for(lab.hub_namespace, "hub")
    return lab.control_plane.write_kubeconfig(
        lab.dir / f"hub-proxied-{secrets.token_hex(2)}",
        token=token,
        namespace=lab.hub_namespace,
        server=proxy.url,
    )


def spawn_all(
    config: Path,
    kubeconfig: Path,
    users: list[str],
    timeout: float = 180,
    started: Callable[[Any, str], None] | None = None,
) -> list[Any]:
    """Every user's start() at once on one hub loop, then stop(); per user, their namespace or
    the exception their spawn ended with (stopped, as JupyterHub stops a failed spawn).
    `started(spawner, url)` is called after a start, before the stop."""
    from kubelab.spawner.cli import _OfflineKube, load_config
    from kubelab.spawner.kube import KubeLabSpawner
    from kubelab.spawner.offline import offline_spawner

    async def one(user: str) -> Any:
        spawner = await offline_spawner(load_config(config), user, [])
        spawner.user_options = {}
        spawner.api_token = secrets.token_hex(8)
        try:
            url = await asyncio.wait_for(spawner.start(), timeout)
            if started:
                await asyncio.to_thread(started, spawner, url)
        finally:
            await spawner.stop(now=True)
        return spawner.namespace

    async def go() -> list[Any]:
        try:
            return await asyncio.gather(*(one(u) for u in users), return_exceptions=True)
        finally:
            await KubeLabSpawner._stop_all_reflectors()
            await KubeLabSpawner.stop_watches()

    with _OfflineKube(str(kubeconfig)):
        return asyncio.run(go())


def bundle_writes(seen: list[Any], namespace: str) -> list[Any]:
    return [
        r
        for r in seen
        if r.verb in WRITES
        and r.resource in BUNDLE
        and (f"/namespaces/{namespace}/" in r.path or r.path.endswith(f"/namespaces/{namespace}"))
    ]


def test_a_returning_users_spawn_reads_its_bundle_once_and_writes_nothing(lab: Lab, proxy: Any) -> None:
    install(lab, lab.control_plane.kubeconfig)
    config, hub = lab.config(), proxied_hub(lab, proxy)
    namespace = lab.user_namespace("erin")
    assert spawn_all(config, hub, ["erin"]) == [namespace]
    first = bundle_writes(proxy.seen(), namespace)
    assert {r.resource for r in first} == BUNDLE  # the first spawn wrote all of it
    proxy.forget()

    assert spawn_all(config, hub, ["erin"]) == [namespace]
    seen = proxy.seen()
    assert bundle_writes(seen, namespace) == []
    reads = [r for r in seen if r.resource in BUNDLE and r.verb in ("get", "list")]
    assert [(r.verb, r.path) for r in reads] == [("get", f"/api/v1/namespaces/{namespace}")]
    assert [r.verb for r in seen if r.resource == "pods" and r.verb in WRITES] == ["create", "delete"]


def test_with_the_hubs_watch_a_returning_users_spawn_asks_only_for_its_pod(lab: Lab, proxy: Any) -> None:
    """With availability on (the shipped default), the hub's namespace watch holds the bundle's
    hash, so the spawn reads nothing of the bundle; it ends when that watch sees the pod run,
    with the URL and uid of the pod the API server has, not KubeSpawner's next poll."""
    install(lab, lab.control_plane.kubeconfig)
    config, hub = lab.config("c.KubeLabSpawner.check_availability = True\n"), proxied_hub(lab, proxy)
    namespace = lab.user_namespace("ida")
    assert spawn_all(config, hub, ["ida"]) == [namespace]
    proxy.forget()

    started: list[tuple[str, str, str]] = []

    def record(spawner: Any, url: str) -> None:
        pod = k8s.CoreV1Api(lab.admin).read_namespaced_pod(spawner.pod_name, namespace)
        assert pod.status is not None and pod.metadata is not None
        started.append((url, spawner.pod_id, f"http://{pod.status.pod_ip}:{spawner.port or 8888}"))
        assert pod.metadata.uid == spawner.pod_id and pod.status.phase == "Running"

    assert spawn_all(config, hub, ["ida"], started=record) == [namespace]
    seen = proxy.seen()
    assert bundle_writes(seen, namespace) == []
    assert [r for r in seen if r.verb == "get" and r.resource in BUNDLE] == []
    assert [r.verb for r in seen if r.resource == "pods" and r.verb in WRITES] == ["create", "delete"]
    [(url, _, expected)] = started
    assert url == expected


def test_a_changed_configuration_reaches_the_next_spawn_and_reconcile_records_it(
    lab: Lab, proxy: Any
) -> None:
    install(lab, lab.control_plane.kubeconfig)
    hub = proxied_hub(lab, proxy)
    namespace = lab.user_namespace("finn")
    assert spawn_all(lab.config(), hub, ["finn"]) == [namespace]
    policies = plain(k8s.NetworkingV1Api(lab.admin).list_namespaced_network_policy(namespace))["items"]
    assert policies

    proxy.forget()  # an upgrade: this configuration builds no NetworkPolicies
    closed = lab.config("c.KubeLabSpawner.network_policy = False\n")
    assert spawn_all(closed, hub, ["finn"]) == [namespace]
    deleted = {r.path.rsplit("/", 1)[1] for r in bundle_writes(proxy.seen(), namespace) if r.verb == "delete"}
    assert deleted == {p["metadata"]["name"] for p in policies}
    assert k8s.NetworkingV1Api(lab.admin).list_namespaced_network_policy(namespace).items == []

    # `kubelab hub reconcile` with a third configuration; the spawn after it finds it done
    quota = "c.JupyterHub.load_groups = {'public': {'users': [], 'properties': {'quota': {'user': {'gpus': 3}}}}}\n"
    third = lab.config("c.KubeLabSpawner.network_policy = False\n" + quota)
    report = reconcile(lab, third, lab.hub_kubeconfig())[namespace]
    assert report["applied"] and "error" not in report
    quota_object = k8s.CoreV1Api(lab.admin).read_namespaced_resource_quota("kubelab-quota", namespace)
    hard = plain(quota_object)["spec"]["hard"]
    assert hard["requests.nvidia.com/gpu"] == "3"  # beside the namespace's object counts
    proxy.forget()
    assert spawn_all(third, hub, ["finn"]) == [namespace]
    assert bundle_writes(proxy.seen(), namespace) == []


def scheduling_failures(admin: Any, namespace: str) -> list[str]:
    events = plain(k8s.CoreV1Api(admin).list_namespaced_event(namespace))["items"]
    return [e.get("message") for e in events if e.get("reason") == "FailedScheduling"]


def test_a_first_spawn_makes_its_pod_once_immediate_claims_are_bound(lab: Lab, proxy: Any) -> None:
    """The loopback cluster's default class binds Immediately (its provisioner watches claims): a pod made
    before then is refused by the scheduler for unbound claims and retried after a backoff."""
    install(lab, lab.control_plane.kubeconfig)
    namespace = lab.user_namespace("gail")
    assert spawn_all(lab.config(), proxied_hub(lab, proxy), ["gail"]) == [namespace]
    claims = plain(k8s.CoreV1Api(lab.admin).list_namespaced_persistent_volume_claim(namespace))["items"]
    assert {c["status"]["phase"] for c in claims} == {"Bound"}
    assert scheduling_failures(lab.admin, namespace) == []
    # waited on the hub's one watch of kubelab's claims, not a list and a watch of this namespace
    reads = [r.path for r in proxy.seen() if r.resource == "persistentvolumeclaims" and r.verb != "create"]
    assert reads and all(p == "/api/v1/persistentvolumeclaims" for p in reads), reads


def test_a_first_spawn_makes_its_pod_after_the_whole_bundle(lab: Lab, proxy: Any) -> None:
    """The namespace first, and the pod only after every other object of the bundle (its
    ResourceQuota, LimitRange, NetworkPolicies, Role and binding, claim) and the bundle's hash:
    a notebook never runs in a namespace that lacks its bounds."""
    install(lab, lab.control_plane.kubeconfig)
    namespace = lab.user_namespace("gwen")
    assert spawn_all(lab.config(), proxied_hub(lab, proxy), ["gwen"]) == [namespace]
    order = [  # every write in the namespace, in the order the API server was asked
        (r.verb, r.resource)
        for r in proxy.seen()
        if r.verb in WRITES
        and (f"/namespaces/{namespace}/" in r.path or r.path.endswith(f"/namespaces/{namespace}"))
    ]
    assert order[0] == ("patch", "namespaces"), order
    pod = order.index(("create", "pods"))
    assert order[pod - 1] == ("patch", "namespaces"), order  # the hash, last of the bundle
    before = {resource for _, resource in order[:pod]}
    assert BUNDLE | {"limitranges"} <= before, order


def test_no_pod_starts_before_the_namespaces_quota_is_counted(lab: Lab, proxy: Any) -> None:
    """Until the controller-manager first counts a new ResourceQuota (its status), the API
    server's quota admission checks nothing against it: a pod made then would run unbounded.
    With the controller-manager paused, the spawn applies the quota, then waits, reading it,
    with no hash and no pod; resumed, the quota is counted and the spawn completes."""
    install(lab, lab.control_plane.kubeconfig)
    namespace = lab.user_namespace("ivy")
    core = k8s.CoreV1Api(lab.admin)
    processes = getattr(lab.control_plane, "processes", None)
    if processes is None:
        pytest.skip("pauses the loopback control plane's controller-manager")
    manager = processes["kube-controller-manager"]

    def quota_reads() -> int:
        return sum(
            1
            for r in proxy.seen()
            if (r.verb, r.resource) == ("get", "resourcequotas") and f"/namespaces/{namespace}/" in r.path
        )

    manager.send_signal(signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(1) as pool:
            spawned = pool.submit(spawn_all, lab.config(), proxied_hub(lab, proxy), ["ivy"])
            poll(lambda: quota_reads() >= 3 or spawned.done(), 60, "the spawn reading its uncounted quota")
            assert not spawned.done(), spawned.result()
            assert not plain(core.list_namespaced_pod(namespace))["items"]
            annotations = plain(core.read_namespace(namespace))["metadata"].get("annotations") or {}
            assert BUNDLE_HASH not in annotations  # a spawn cut short here redoes the bundle
            manager.send_signal(signal.SIGCONT)
            assert spawned.result(timeout=180) == [namespace]
    finally:
        manager.send_signal(signal.SIGCONT)
    (quota,) = plain(core.list_namespaced_resource_quota(namespace))["items"]
    assert quota["status"]["hard"] == quota["spec"]["hard"]


def test_wait_for_first_consumer_claims_are_left_to_the_scheduler(lab: Lab, proxy: Any) -> None:
    """Such a claim binds only once a pod that uses it is scheduled: waiting for it first would
    never end (the wait is set longer than the spawn may take, so waiting fails the spawn)."""
    name = f"wffc-{lab.suffix}"
    storage = k8s.StorageV1Api(lab.admin)
    storage.create_storage_class(
        manifest(
            {
                "metadata": {"name": name},
                "provisioner": "kubelab.dev/loopback-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
    )
    try:
        install(lab, lab.control_plane.kubeconfig)
        config = lab.config(
            f"c.KubeLabSpawner.storage_class = {name!r}\nc.KubeLabSpawner.claim_bind_timeout = 600\n"
        )
        namespace = lab.user_namespace("hal")
        assert spawn_all(config, proxied_hub(lab, proxy), ["hal"], timeout=60) == [namespace]
        claims = plain(k8s.CoreV1Api(lab.admin).list_namespaced_persistent_volume_claim(namespace))["items"]
        assert {c["spec"].get("storageClassName") for c in claims} == {name}
    finally:
        storage.delete_storage_class(name)


def test_a_storm_of_busy_answers_ends_each_spawn_started_or_named_and_blocks_no_next_spawn(
    lab: Lab, proxy: Any
) -> None:
    install(lab, lab.control_plane.kubeconfig)
    config, hub = lab.config(), proxied_hub(lab, proxy)
    users = [f"u{i}" for i in range(6)]
    # retried away: a few of each kind of busy answer on every step of a spawn
    proxy.fail_next("get", "namespaces", 500, times=3)
    proxy.fail_next("patch", "namespaces", 503, times=3)
    proxy.fail_next("patch", "roles", 429, times=4, retry_after=1)
    proxy.fail_next("create", "persistentvolumeclaims", 502, times=3)
    proxy.fail_next("create", "pods", 429, times=4, retry_after=1)
    # and for two users, a storm that outlasts every retry
    for user in users[:2]:
        where = f"/namespaces/{lab.user_namespace(user)}/"
        proxy.fail_next(
            "patch", "resourcequotas", 429, times=100, retry_after=1, message="storm", where=where
        )
    results = spawn_all(config, hub, users)
    for result in results[:2]:
        assert isinstance(result, Exception), result
        message = getattr(result, "jupyterhub_message", None) or str(result)
        assert "overloaded (429 Too Many Requests)" in message and "storm" in message, repr(result)
    assert results[2:] == [lab.user_namespace(u) for u in users[2:]]

    proxy.clear_faults()  # the storm is over: everyone's next spawn starts, with a whole bundle
    assert spawn_all(config, hub, users) == [lab.user_namespace(u) for u in users]
    complete = objects_in(lab.admin, lab.user_namespace(users[0]))
    for user in users:
        assert sorted(objects_in(lab.admin, lab.user_namespace(user))) == sorted(complete)
