"""On the real control plane, a notebook's own token tries what a hostile user did in the second
review (issue findings 3, 4, 8, 10, 11, 12 and 18), in a namespace prepared as a spawn prepares
it, with the admission policies of `kubelab hub render --all` applied; the API server refuses
each. Pods directly are refused by RBAC, so the notebook's way to run pods is a Job: its pods
are created by the Job controller, and refused by the same admission (`FailedCreate` events).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.fixtures import RealCluster
from controlplane.objects import create_renamed, delete_namespaces
from kubelab_testing import manifest, plain
from kubernetes import client, config

from kubelab.spawner.admission_policy import POLICIES
from kubelab.spawner.cli import render, render_all

pytestmark = pytest.mark.cluster
HUB_CONFIG = Path(__file__).resolve().parents[2] / "hub_config" / "jupyterhub_config.py"
IMAGE = "registry.example.org/lab/notebook:1"
HUB = "bounds-hub"
GROUPS = {
    "public": {
        "users": [],
        "properties": {"node_selector": {"org": "public"}, "quota": {"user": {"gpus": 1}}},
    },
    "vision": {"users": ["bob"], "properties": {"node_selector": {"org": "vision"}}},
}
BOUNDS = {"pods": 6, "serviceaccounts": 5, "cronjobs": 2}


class Lab:
    def __init__(self, namespace: str, admin: Path, notebook: Path, renamed: dict[str, str]) -> None:
        self.namespace, self.admin, self.notebook, self.renamed = namespace, admin, notebook, renamed

    def api(self, admin: bool = False) -> Any:
        return config.new_client_from_config(str(self.admin if admin else self.notebook))


def lab_config(folder: Path) -> Path:
    path = folder / "jupyterhub_config.py"
    path.write_text(
        f"load_subconfig({str(HUB_CONFIG)!r})\nc = get_config()\n"
        f"c.KubeLabSpawner.hub_namespace = {HUB!r}\n"
        f"c.KubeLabSpawner.namespace_bounds = {BOUNDS!r}\n"
        f"c.JupyterHub.load_groups = {GROUPS!r}\n"
    )
    return path


@pytest.fixture(scope="module")
def lab(cluster: ControlPlane | RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """Alice's namespace as her spawn prepares it (in group `public`, node selector org=public),
    with the policies and this hub's bindings, all renamed for this module."""
    folder = tmp_path_factory.mktemp("bounds")
    kubeconfig = cluster.kubeconfig
    path = lab_config(folder)
    admission = [o for o in render_all(path) if o["kind"].startswith("ValidatingAdmissionPolicy")]
    spawned = [o for o in render("alice", [], {}, path) if o["kind"] not in ("PersistentVolumeClaim", "Pod")]
    cluster_scoped = [o["metadata"]["name"] for o in admission]
    _, renamed = create_renamed(kubeconfig, [*admission, *spawned], ["user-alice", HUB, *cluster_scoped])
    namespace = renamed["user-alice"]
    token = cluster.token_for(namespace, "kubelab-notebook")
    notebook = cluster.write_kubeconfig(folder / "notebook", token=token, namespace=namespace)
    lab = Lab(namespace, kubeconfig, notebook, renamed)
    try:
        wait_for_policies(lab)
        wait_for_quota(lab)
        yield lab
    finally:
        delete_namespaces(kubeconfig, namespace)
        with lab.api(admin=True) as api:
            admission_api = client.AdmissionregistrationV1Api(api)
            for name in cluster_scoped:
                renamed_name = renamed[name]
                if name.endswith(HUB):
                    admission_api.delete_validating_admission_policy_binding(renamed_name)
                else:
                    admission_api.delete_validating_admission_policy(renamed_name)


def wait_for_policies(lab: Lab) -> None:
    """The API server compiles a new policy and sees its binding within a moment: until then a
    dry-run Service with `externalIPs` (which nothing else refuses) is let through."""
    probe = service("probe", {"externalIPs": ["203.0.113.7"]})
    deadline = time.monotonic() + 30
    with lab.api(admin=True) as api:
        core = client.CoreV1Api(api)
        while time.monotonic() < deadline:
            try:
                core.create_namespaced_service(lab.namespace, manifest(probe), dry_run="All")
            except client.ApiException as refused:
                if "ValidatingAdmissionPolicy" in str(refused.body):
                    return
                raise
            time.sleep(0.2)
    raise AssertionError("the admission policies never applied to the namespace")


def wait_for_quota(lab: Lab, counted: tuple[str, ...] = ()) -> None:
    """Until its controller has counted the namespace, a quota refuses what it counts; a
    resource a CRD has just added (`counted`) is counted once the controller has found it."""
    deadline = time.monotonic() + 120
    with lab.api(admin=True) as api:
        core = client.CoreV1Api(api)
        while time.monotonic() < deadline:
            quota = plain(core.read_namespaced_resource_quota("kubelab-quota", lab.namespace))
            used = quota["status"].get("used") or {}
            if used and all(name in used for name in counted):  # the controller has counted them
                return
            time.sleep(0.2)
    raise AssertionError(f"the namespace's quota was never counted: {used}")


def service(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


def container(**resources: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "c", "image": IMAGE}
    if resources:
        body["resources"] = resources
    return body


def job(name: str, parallelism: int = 1, **pod_spec: Any) -> dict[str, Any]:
    spec = {"restartPolicy": "Never", "nodeSelector": {"org": "public"}, "containers": [container()]}
    spec.update(pod_spec)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"spec": spec},
        },
    }


def outcome(lab: Lab, spec: dict[str, Any]) -> tuple[str, Any]:
    """Create the Job with the notebook's token: the Job controller's `FailedCreate` message for
    its pods, or '' and its first pod. The Job goes again afterwards (its pods count against the
    namespace's pod count). A quota refusal is the pod count of another test's pods on their way
    out: the controller tries again."""
    name = f"{spec['metadata']['name']}-{uuid.uuid4().hex[:4]}"
    spec = {**spec, "metadata": {"name": name}}
    with lab.api() as api:
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        batch.create_namespaced_job(lab.namespace, manifest(spec))
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                events = core.list_namespaced_event(
                    lab.namespace, field_selector=f"involvedObject.name={name}"
                )
                for event in events.items:
                    if event.reason == "FailedCreate" and "exceeded quota" not in (event.message or ""):
                        return str(event.message), None
                pods = core.list_namespaced_pod(lab.namespace, label_selector=f"job-name={name}").items
                if pods:
                    return "", pods[0]
                time.sleep(0.2)
            raise AssertionError(f"job {name}: neither a pod nor a refusal")
        finally:
            drop_job(lab, name)


def drop_job(lab: Lab, name: str) -> None:
    with lab.api(admin=True) as api:
        core = client.CoreV1Api(api)
        client.BatchV1Api(api).delete_namespaced_job(name, lab.namespace, propagation_policy="Background")
        deadline = time.monotonic() + 60
        while core.list_namespaced_pod(lab.namespace, label_selector=f"job-name={name}").items:
            assert time.monotonic() < deadline, f"the pods of job {name} stay"
            time.sleep(0.2)


def refusal_of(lab: Lab, spec: dict[str, Any]) -> str:
    return outcome(lab, spec)[0]


def refused(call: Any) -> str:
    with pytest.raises(client.ApiException) as refusal:
        call()
    assert refusal.value.status == 403, refusal.value.body
    return str(refusal.value.body)


# -- finding 8: the group's node selector and tolerations bind every pod ----------------------


@pytest.mark.parametrize(
    ("attack", "pod_spec", "reason"),
    [
        (
            "other-group",
            {"nodeSelector": {"org": "vision"}},
            "must keep the group's node selector org=public",
        ),
        ("no-selector", {"nodeSelector": {}}, "must keep the group's node selector org=public"),
        ("node-name", {"nodeName": "a100-0"}, "may not name its node"),
        (
            "tolerate-all",
            {"tolerations": [{"operator": "Exists"}]},
            "spec.tolerations may name only the keys",
        ),
        (
            "other-taint",
            {"tolerations": [{"key": "org", "operator": "Equal", "value": "vision", "effect": "NoSchedule"}]},
            "spec.tolerations may name only the keys",
        ),
    ],
)
def test_a_job_cannot_leave_its_groups_nodes(
    lab: Lab, attack: str, pod_spec: dict[str, Any], reason: str
) -> None:
    message = refusal_of(lab, job(attack, **pod_spec))
    assert "ValidatingAdmissionPolicy" in message and reason in message, message


def test_a_job_on_its_groups_nodes_with_the_gpu_toleration_gets_its_pod(lab: Lab) -> None:
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    selector = {"org": "public", "gpu-type": "T4"}
    assert refusal_of(lab, job("placed", nodeSelector=selector, tolerations=[gpu])) == ""


def test_the_spawners_own_notebook_pods_pass_the_policies(lab: Lab, tmp_path: Path) -> None:
    """What KubeSpawner creates for a CPU and a GPU notebook (as the hub, here the admin)."""
    path = lab_config(tmp_path)
    with lab.api(admin=True) as api:
        core = client.CoreV1Api(api)
        for options in ({}, {"gpus": "1(T4)"}):
            pod = next(o for o in render("alice", [], options, path) if o["kind"] == "Pod")
            pod["metadata"]["namespace"] = lab.namespace
            pod["metadata"]["name"] = f"jupyter-{uuid.uuid4().hex[:6]}"
            core.create_namespaced_pod(lab.namespace, manifest(pod), dry_run="All")


def test_kubelabs_own_experiments_pass_the_policies(lab: Lab, tmp_path: Path) -> None:
    """`kubelab run` in the notebook, with the environment its spawn gives it and its token: the
    Job's pod keeps the group's selector and the catalog's toleration, and is created."""
    path = lab_config(tmp_path)
    pod = next(o for o in render("alice", [], {"gpus": "1(T4)"}, path) if o["kind"] == "Pod")
    env = {
        e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"].startswith("KUBELAB_")
    }
    env.update(
        KUBELAB_NAMESPACE=lab.namespace, KUBELAB_HOME=str(tmp_path / "home"), KUBECONFIG=str(lab.notebook)
    )
    command = [sys.executable, "-m", "kubelab.cli", "run", "--name", "own", "--gpus", "1", "--cpu", "100m"]
    done = subprocess.run(
        [*command, "--memory", "64Mi", "--", "python", "-c", "pass"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with lab.api() as api:
        core = client.CoreV1Api(api)
        deadline = time.monotonic() + 60
        pods: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not pods:
            listed = core.list_namespaced_pod(lab.namespace, label_selector="kubelab.io/experiment")
            pods = plain(listed)["items"]
            time.sleep(0.2)
        refusals = [
            e.message for e in core.list_namespaced_event(lab.namespace).items if e.reason == "FailedCreate"
        ]
    assert pods, refusals
    assert pods[0]["spec"]["nodeSelector"]["org"] == "public"
    assert "nvidia.com/gpu" in {t.get("key") for t in pods[0]["spec"]["tolerations"]}
    for job in {p["metadata"]["labels"]["job-name"] for p in pods}:
        drop_job(lab, job)


# -- findings 3 and 12: pod slots, minimum requests, maxima and ratios ------------------------


def test_tiny_requests_are_refused_so_pod_slots_cannot_be_filled_cheaply(lab: Lab) -> None:
    tiny = container(requests={"cpu": "1m", "memory": "64Mi"}, limits={"cpu": "1m", "memory": "64Mi"})
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    message = refusal_of(lab, job("slots", 222, containers=[tiny], tolerations=[gpu]))
    assert "minimum cpu usage per Container is 50m" in message, message


@pytest.mark.parametrize(
    ("resources", "reason"),
    [
        (
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000", "memory": "1Ti"}},
            "maximum cpu",
        ),
        (
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "64", "memory": "1Gi"}},
            "cpu max limit to request ratio",
        ),
        (
            {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "8Gi"}},
            "memory max limit to request ratio",
        ),
    ],
)
def test_unbounded_limits_are_refused(lab: Lab, resources: dict[str, Any], reason: str) -> None:
    message = refusal_of(lab, job("limits", containers=[container(**resources)]))
    assert reason in message, message


def test_a_container_without_resources_gets_the_defaults(lab: Lab) -> None:
    message, pod = outcome(lab, job("defaults"))
    assert message == "", message
    resources = pod.spec.containers[0].resources
    assert resources.requests == {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}
    assert resources.limits == {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "20Gi"}


# -- finding 10: generic ephemeral volumes ------------------------------------------------------


def ephemeral(size: str) -> dict[str, Any]:
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}
    return {"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}


def test_a_huge_ephemeral_volume_is_refused(lab: Lab) -> None:
    message = refusal_of(lab, job("scratch", volumes=[ephemeral("100Ti")]))
    assert "each ephemeral volume may ask for at most 100Gi" in message, message
    assert refusal_of(lab, job("scratch-ok", volumes=[ephemeral("1Gi")])) == ""


# -- finding 4: Services ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"externalIPs": ["203.0.113.7"]}, "may not set spec.externalIPs (CVE-2020-8554)"),
        ({"type": "NodePort"}, "must be of type ClusterIP, not NodePort"),
        ({"type": "LoadBalancer"}, "must be of type ClusterIP, not LoadBalancer"),
    ],
)
def test_a_notebook_cannot_expose_services_outside_the_cluster(
    lab: Lab, spec: dict[str, Any], reason: str
) -> None:
    with lab.api() as api:
        core = client.CoreV1Api(api)
        body = refused(
            lambda: core.create_namespaced_service(lab.namespace, manifest(service("exposed", spec)))
        )
        assert reason in body, body
        core.create_namespaced_service(lab.namespace, manifest(service(f"inside-{uuid.uuid4().hex[:4]}", {})))
        hard = plain(core.read_namespaced_resource_quota("kubelab-quota", lab.namespace))["spec"]["hard"]
    assert hard["services.nodeports"] == "0" and hard["services.loadbalancers"] == "0"


# -- finding 11: object counts and schedules ------------------------------------------------------


def test_service_accounts_stop_at_the_namespaces_count(lab: Lab) -> None:
    with lab.api() as api:
        core = client.CoreV1Api(api)
        made = 0
        for i in range(BOUNDS["serviceaccounts"] + 1):
            try:
                core.create_namespaced_service_account(
                    lab.namespace, manifest({"metadata": {"name": f"flood-{i}"}})
                )
                made += 1
            except client.ApiException as refusal:
                assert refusal.status == 403 and "exceeded quota" in str(refusal.body), refusal.body
                assert "limited: count/serviceaccounts=5" in str(refusal.body), refusal.body
                break
    with lab.api(admin=True) as api:  # listing them is not the notebook's right
        held = client.CoreV1Api(api).list_namespaced_service_account(lab.namespace).items
    assert made < BOUNDS["serviceaccounts"] and len(held) == BOUNDS["serviceaccounts"], (made, len(held))


def cronjob(name: str, schedule: str) -> dict[str, Any]:
    template = {
        "spec": {"restartPolicy": "Never", "nodeSelector": {"org": "public"}, "containers": [container()]}
    }
    return {
        "metadata": {"name": name},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": template}}},
    }


@pytest.mark.parametrize(
    "schedule",
    ["* * * * *", "*/1 * * * *", "0-59 * * * *", "@every 1m", "0,1,2,3,4,5,6,7,8,9,10,11,12 * * * *"],
)
def test_a_schedule_cannot_fire_every_minute(lab: Lab, schedule: str) -> None:
    with lab.api() as api:
        batch = client.BatchV1Api(api)
        body = refused(
            lambda: batch.create_namespaced_cron_job(lab.namespace, manifest(cronjob("often", schedule)))
        )
    assert "spec.schedule may fire at most once per 5 minutes" in body, body


def test_schedules_stop_at_the_namespaces_count(lab: Lab) -> None:
    with lab.api() as api:
        batch = client.BatchV1Api(api)
        for i, schedule in enumerate(["*/5 * * * *", "0 3 * * *"]):
            batch.create_namespaced_cron_job(lab.namespace, manifest(cronjob(f"ok-{i}", schedule)))
        body = refused(
            lambda: batch.create_namespaced_cron_job(lab.namespace, manifest(cronjob("third", "@hourly")))
        )
    assert "exceeded quota" in body and "count/cronjobs.batch=2" in body, body


# -- finding 18: RoleBindings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "subject",
    [
        {"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"},
        {
            "kind": "User",
            "name": "system:serviceaccount:kube-system:default",
            "apiGroup": "rbac.authorization.k8s.io",
        },
        {"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"},
    ],
)
def test_the_notebook_role_cannot_be_handed_outside_the_namespace(lab: Lab, subject: dict[str, Any]) -> None:
    def binding(name: str, subject: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kubelab-notebook"},
            "subjects": [subject],
        }

    with lab.api() as api:
        rbac = client.RbacAuthorizationV1Api(api)
        body = refused(
            lambda: rbac.create_namespaced_role_binding(lab.namespace, manifest(binding("shared", subject)))
        )
        assert "may name only ServiceAccounts of its own namespace" in body, body
        own = {"kind": "ServiceAccount", "name": "kubelab-notebook", "namespace": lab.namespace}
        name = f"own-{uuid.uuid4().hex[:4]}"
        rbac.create_namespaced_role_binding(lab.namespace, manifest(binding(name, own)))
        rbac.delete_namespaced_role_binding(name, lab.namespace)


def test_each_policy_type_checks_against_its_kind(lab: Lab) -> None:
    """The API server type-checks each expression against the kind it matches; a warning would
    mean an expression naming a field its kind lacks (which fails, or refuses, at run time)."""
    deadline = time.monotonic() + 30
    with lab.api(admin=True) as api:
        admission = client.AdmissionregistrationV1Api(api)
        for policy in POLICIES:
            status = admission.read_validating_admission_policy(lab.renamed[policy.name]).status
            while status is None or status.type_checking is None:
                assert time.monotonic() < deadline, f"{policy.name} was never type-checked"
                time.sleep(0.2)
                status = admission.read_validating_admission_policy(lab.renamed[policy.name]).status
            assert not status.type_checking.expression_warnings, status.type_checking.expression_warnings


# -- the notebook cannot loosen any of it --------------------------------------------------------


def test_the_notebook_cannot_edit_its_bounds(lab: Lab) -> None:
    name = lab.renamed
    with lab.api() as api:
        core, admission = client.CoreV1Api(api), client.AdmissionregistrationV1Api(api)
        loosen = {"metadata": {"labels": {"kubelab.io/hub": "elsewhere"}}}
        attempts = [
            lambda: core.patch_namespace(lab.namespace, loosen),
            lambda: core.patch_namespace(
                lab.namespace, {"metadata": {"annotations": {"kubelab.io/node-selector": ""}}}
            ),
            lambda: core.delete_namespaced_limit_range("kubelab-limits", lab.namespace),
            lambda: core.patch_namespaced_resource_quota(
                "kubelab-quota", lab.namespace, {"spec": {"hard": {"pods": "999"}}}
            ),
            lambda: admission.delete_validating_admission_policy(name["kubelab-user-pods"]),
            lambda: admission.patch_validating_admission_policy_binding(
                name[f"kubelab-user-pods-{HUB}"], {"spec": {"validationActions": ["Audit"]}}
            ),
            lambda: admission.delete_validating_admission_policy_binding(
                name[f"kubelab-user-rolebindings-{HUB}"]
            ),
        ]
        for attempt in attempts:
            refused(attempt)
    assert {p.name for p in POLICIES} <= set(name)


# -- finding 3: one namespace cannot take every pod slot (last: it fills the pod count) -----


def test_a_wide_job_gets_at_most_the_namespaces_pod_count(lab: Lab) -> None:
    name = f"wide-{uuid.uuid4().hex[:4]}"
    small = container(requests={"cpu": "50m", "memory": "32Mi"}, limits={"cpu": "50m", "memory": "32Mi"})
    with lab.api() as api:
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        batch.create_namespaced_job(lab.namespace, manifest(job(name, 222, containers=[small])))
        deadline = time.monotonic() + 60
        refusals: list[str] = []
        while time.monotonic() < deadline and not refusals:
            events = core.list_namespaced_event(lab.namespace, field_selector=f"involvedObject.name={name}")
            refusals = [
                e["message"] for e in plain(events)["items"] if "exceeded quota" in e.get("message", "")
            ]
            time.sleep(0.2)
        assert refusals and "limited: pods=6" in refusals[0], refusals
        pods = core.list_namespaced_pod(lab.namespace).items
    drop_job(lab, name)
    assert len(pods) <= BOUNDS["pods"], len(pods)
