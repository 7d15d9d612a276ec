"""API failures become clear errors or transparent retries; nothing half-made is left.

Refusals (RBAC, quota, validation, conflicts) come from the real API server. Faults it will
not produce on demand (5xx, unreachable, 410 Gone on a resumed watch) come from a fault proxy
in front of it (tests/controlplane/faults.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from controlplane.cluster import ControlPlane
from controlplane.faults import FaultProxy
from kube_support import objects, wait_for, wait_running
from kubelab_testing import manifest
from kubernetes import client

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.errors import Forbidden, QuotaExceeded, Unavailable
from kubelab.errors import Conflict, ValidationError
from kubelab.experiments import Experiments
from kubelab.spec import ExperimentSpec

SPEC = {"command": ["python", "train.py"], "resources": {"cpu": "1", "memory": "1Gi"}}
PYTORCH = {**SPEC, "framework": "pytorch", "replicas": 2}


def counted(core: client.CoreV1Api, name: str, namespace: str) -> bool:
    """The quota controller has counted the quota `name` once (its status holds the limits)."""
    status = core.read_namespaced_resource_quota(name, namespace).status
    return bool(status and status.hard)


def can_create_jobs(kubeconfig: Path, namespace: str) -> bool:
    from kubernetes import config

    with config.new_client_from_config(str(kubeconfig)) as api:
        review = client.AuthorizationV1Api(api).create_self_subject_access_review(
            manifest(
                {
                    "spec": {
                        "resourceAttributes": {
                            "namespace": namespace,
                            "verb": "create",
                            "group": "batch",
                            "resource": "jobs",
                        }
                    }
                }
            )
        )
    return bool(review.status and review.status.allowed)


def test_rbac_refusal_names_the_role(
    lab: Experiments, namespace: str, home: Path, admin: client.ApiClient, notebook_kubeconfig: Path
) -> None:
    client.RbacAuthorizationV1Api(admin).delete_namespaced_role_binding("kubelab-notebook", namespace)
    wait_for(lambda: not can_create_jobs(notebook_kubeconfig, namespace), what="RBAC to see the binding gone")
    with pytest.raises(Forbidden) as err:
        lab.submit(SPEC, base_dir=home)
    assert 'cannot create resource "jobs"' in err.value.detail
    assert "hub_config/rbac/notebook-role.yaml" in err.value.detail
    assert not list((home / "runs").iterdir())


def test_transient_5xx_is_retried(
    proxy: FaultProxy, proxied_lab: Experiments, admin: client.ApiClient, namespace: str, home: Path
) -> None:
    proxy.fail_next("create", "jobs", 500, times=2)
    record = proxied_lab.submit(SPEC, base_dir=home)
    assert record["status"] == "Pending"
    assert len(objects(admin, "jobs", namespace)) == 1


def test_persistent_5xx_becomes_unavailable(proxy: FaultProxy, proxied_lab: Experiments, home: Path) -> None:
    proxy.fail_next("create", "jobs", 503, times=10)
    with pytest.raises(Unavailable) as err:
        proxied_lab.submit(SPEC, base_dir=home)
    assert "kept failing (503" in err.value.detail


def test_connection_refused(proxy: FaultProxy, proxied_lab: Experiments, home: Path) -> None:
    with proxy.unreachable(), pytest.raises(Unavailable) as err:
        proxied_lab.submit(SPEC, base_dir=home)
    assert "cannot reach the Kubernetes API" in err.value.detail
    assert "connection refused" in err.value.detail
    assert not list((home / "runs").iterdir())


def test_invalid_object_is_a_validation_error(
    make_backend: Callable[..., KubernetesBackend], home: Path
) -> None:
    # a spawner that already mounts its own /dev/shm volume named like kubelab's
    backend = make_backend(start=False, volumes=[{"name": "dshm", "emptyDir": {}}], mounts=[])
    lab = Experiments(home=home, backend=backend, user="alice")
    with pytest.raises(ValidationError) as err:
        lab.submit(SPEC, base_dir=home)
    assert "Kubernetes refused to create Job" in err.value.detail
    assert [f.path for f in err.value.fields] == ["kubernetes.spec.template.spec.volumes[1].name"]
    assert "Duplicate value" in err.value.fields[0].reason


def test_name_taken_by_someone_else_is_a_conflict(
    lab: Experiments, backend: KubernetesBackend, namespace: str, home: Path, admin: client.ApiClient
) -> None:
    record = lab.submit(SPEC, base_dir=home)
    run = lab.run(record["id"])
    spec = ExperimentSpec.parse(run.spec())
    job = backend.render(spec, run.id)[0]
    job["metadata"]["labels"]["kubelab.io/experiment"] = "someoneelse0"
    batch = client.BatchV1Api(admin)
    batch.delete_namespaced_job(job["metadata"]["name"], namespace, propagation_policy="Foreground")
    wait_for(lambda: not objects(admin, "jobs", namespace), what="the Job gone")
    batch.create_namespaced_job(namespace, manifest(job))
    with pytest.raises(Conflict) as err:
        backend.submit(run, spec)
    assert "already exists" in err.value.detail


def test_retried_create_that_got_through_is_not_a_conflict(
    lab: Experiments, backend: KubernetesBackend, admin: client.ApiClient, namespace: str, home: Path
) -> None:
    record = lab.submit(SPEC, base_dir=home)
    run = lab.run(record["id"])
    backend.submit(run, ExperimentSpec.parse(run.spec()))  # 409, but the Job is ours
    assert len(objects(admin, "jobs", namespace)) == 1


def test_half_created_experiment_is_cleaned_up(
    proxy: FaultProxy, proxied_lab: Experiments, admin: client.ApiClient, namespace: str, home: Path
) -> None:
    proxy.fail_next(
        "create",
        "jobs",
        403,
        message='jobs.batch is forbidden: admission webhook "policy.example.org" denied the request',
    )
    with pytest.raises(Forbidden) as err:
        proxied_lab.submit(PYTORCH, base_dir=home)
    assert "admission webhook" in err.value.detail
    assert not objects(admin, "services", namespace)
    assert not objects(admin, "jobs", namespace)


def test_quota_refusal_at_submit(
    lab: Experiments, namespace: str, home: Path, admin: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin)
    core.create_namespaced_resource_quota(
        namespace, manifest({"metadata": {"name": "objects"}, "spec": {"hard": {"count/jobs.batch": "0"}}})
    )
    wait_for(
        lambda: counted(core, "objects", namespace),
        what="the quota controller's first count",
    )
    with pytest.raises(QuotaExceeded) as err:
        lab.submit(PYTORCH, base_dir=home)
    assert "exceeded quota: objects" in err.value.detail
    assert err.value.fields[0].path == "resources"
    assert not objects(admin, "services", namespace)


def test_gpu_quota_refusal_of_pods_is_the_pending_reason(
    lab: Experiments, namespace: str, home: Path, admin: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin)
    core.create_namespaced_resource_quota(
        namespace,
        manifest({"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}),
    )
    wait_for(
        lambda: counted(core, "gpus", namespace),
        what="the quota controller's first count",
    )
    record = lab.submit({**SPEC, "resources": {"cpu": "1", "memory": "1Gi", "gpus": 2}}, base_dir=home)
    reason = wait_for(
        lambda: "exceeded quota" in (r := lab.get(record["id"]))["reason"] and r["reason"],
        what="quota reason",
    )
    assert reason.startswith("exceeded quota: gpus, requested: requests.nvidia.com/gpu=2")
    assert lab.get(record["id"])["status"] == "Pending"
    assert lab.resources()["gpus"]["total"] == 1


def test_an_admission_refusal_of_pods_is_the_pending_reason(
    lab: Experiments, namespace: str, home: Path, admin: client.ApiClient
) -> None:
    """A pod the API server refuses for another reason than a quota (here a LimitRange's minimum,
    as user namespaces have) is named too, rather than 'waiting for pods to be created'."""
    core = client.CoreV1Api(admin)
    minimum = {"limits": [{"type": "Container", "min": {"cpu": "50m"}}]}
    core.create_namespaced_limit_range(namespace, manifest({"metadata": {"name": "limits"}, "spec": minimum}))
    record = lab.submit({**SPEC, "resources": {"cpu": "10m", "memory": "64Mi"}}, base_dir=home)
    reason = wait_for(
        lambda: "minimum cpu" in (r := lab.get(record["id"]))["reason"] and r["reason"],
        what="the LimitRange's refusal as the reason",
    )
    assert reason.startswith("minimum cpu usage per Container is 50m, but request is 10m"), reason
    assert lab.get(record["id"])["status"] == "Pending"
    core.delete_namespaced_limit_range("limits", namespace)


def test_watch_410_gone_relists_and_keeps_tracking(
    simulated_cluster: ControlPlane,
    proxy: FaultProxy,
    proxied_lab: Experiments,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    backend = proxied_lab.backend
    assert isinstance(backend, KubernetesBackend) and backend.watcher is not None
    watcher = backend.watcher
    record = proxied_lab.submit(SPEC, base_dir=home)
    pod = wait_running(admin, proxied_lab, namespace, record["id"])[0]["metadata"]["name"]
    relists = watcher.relists
    proxy.cut_watches(expired=True)  # they resume from a compacted version and get 410
    wait_for(lambda: watcher.relists > relists, what="a re-list after 410")
    simulated_cluster.end_pod(namespace, pod)
    wait_for(lambda: proxied_lab.get(record["id"])["status"] == "Succeeded", what="Succeeded after 410")
    assert watcher.open_watches <= len(watcher.kinds)


def test_events_listed_before_their_job_reach_the_run(
    simulated_cluster: ControlPlane,
    proxy: FaultProxy,
    make_backend: Callable[..., KubernetesBackend],
    lab: Experiments,
    namespace: str,
    home: Path,
    tmp_path: Path,
) -> None:
    """A server starting while a run is live lists Jobs, Pods and Events at once. Here the Job
    list fails until the others are done, so the Job's events come before anything names their
    run; they must still reach the run once the Job list answers. The Pod list names the run, and
    updating it reads the Jobs (the cache is not synced yet), which fails too: that failure is the
    run's, and must not keep the Pod and Event watches from ever syncing (it did, one start in
    two, depending on which list came first)."""
    lab.backend.close()  # the run is submitted by a process that watches nothing (the CLI)
    record = lab.submit(SPEC, base_dir=home)
    assert isinstance(lab.backend, KubernetesBackend)
    core = client.CoreV1Api(lab.backend.api.client)
    wait_for(
        lambda: any(
            e.reason == "SuccessfulCreate" and e.involved_object.kind == "Job"
            for e in core.list_namespaced_event(namespace).items
        ),
        what="the Job controller's event",
    )
    kubeconfig = simulated_cluster.write_kubeconfig(
        tmp_path / "server",
        token=simulated_cluster.token_for(namespace, "notebook"),
        namespace=namespace,
        server=proxy.url,
    )
    proxy.fail_next("list", "jobs", 503, times=10**6)
    server = make_backend(start=False, kubeconfig=kubeconfig)
    server.start()
    assert server.watcher is not None
    wait_for(server.watcher.synced["Event"].is_set, what="the Event list")
    wait_for(server.watcher.synced["Pod"].is_set, what="the Pod list, though its run's update failed")
    proxy.clear_faults()
    wait_for(lambda: server.watcher is not None and server.watcher.is_synced, what="the Job list")
    run = lab.run(record["id"])
    reasons = [e["reason"] for e in server.events(run)]
    assert "SuccessfulCreate" in reasons, reasons
