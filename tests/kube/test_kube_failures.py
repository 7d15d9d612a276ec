"""API failures become clear errors or transparent retries; nothing half-made is left."""

from __future__ import annotations

from pathlib import Path

import pytest
from kube_support import pods_of, wait_for
from kubernetes import client

from kubelab.errors import Conflict, ValidationError
from kubelab.kube.errors import Forbidden, QuotaExceeded, Unavailable
from kubelab.lab import Lab

SPEC = {"command": ["python", "train.py"], "resources": {"cpu": "1", "memory": "1Gi"}}
PYTORCH = {**SPEC, "framework": "pytorch", "replicas": 2}


def mine(kube_api, resource: str, namespace: str) -> list[dict]:
    return kube_api.objects(resource, namespace)


def test_rbac_refusal_names_the_role(kube_api, lab: Lab, namespace: str, home: Path,
                                     admin) -> None:
    client.RbacAuthorizationV1Api(admin).delete_namespaced_role_binding("kubelab-notebook",
                                                                       namespace)
    with pytest.raises(Forbidden) as err:
        lab.submit(SPEC, base_dir=home)
    assert 'cannot create resource "jobs"' in err.value.detail
    assert "hub_config/rbac/notebook-role.yaml" in err.value.detail
    assert not list((home / "runs").iterdir())


def test_transient_5xx_is_retried(kube_api, lab: Lab, namespace: str, home: Path) -> None:
    kube_api.fail_next("create", "jobs", 500, times=2)
    record = lab.submit(SPEC, base_dir=home)
    assert record["status"] == "Pending"
    assert len(mine(kube_api, "jobs.batch", namespace)) == 1


def test_persistent_5xx_becomes_unavailable(kube_api, lab: Lab, namespace: str,
                                            home: Path) -> None:
    kube_api.fail_next("create", "jobs", 503, times=10)
    with pytest.raises(Unavailable) as err:
        lab.submit(SPEC, base_dir=home)
    assert "kept failing (503" in err.value.detail
    kube_api.clear_faults()


def test_connection_refused(kube_api, lab: Lab, home: Path) -> None:
    with kube_api.unreachable(), pytest.raises(Unavailable) as err:
        lab.submit(SPEC, base_dir=home)
    assert "cannot reach the Kubernetes API" in err.value.detail
    assert "connection refused" in err.value.detail
    assert not list((home / "runs").iterdir())


def test_invalid_object_is_a_validation_error(kube_api, make_backend, home: Path) -> None:
    # a spawner that already mounts its own /dev/shm volume named like kubelab's
    backend = make_backend(start=False, volumes=[{"name": "dshm", "emptyDir": {}}], mounts=[])
    lab = Lab(home=home, backend=backend, user="alice")
    with pytest.raises(ValidationError) as err:
        lab.submit(SPEC, base_dir=home)
    assert "Kubernetes refused to create Job" in err.value.detail
    assert [f.path for f in err.value.fields] == ["kubernetes.spec.template.spec.volumes[1].name"]
    assert "Duplicate value" in err.value.fields[0].reason


def test_name_taken_by_someone_else_is_a_conflict(kube_api, lab: Lab, backend, namespace: str,
                                                  home: Path, admin) -> None:
    record = lab.submit(SPEC, base_dir=home)
    run = lab.run(record["id"])
    from kubelab.spec import ExperimentSpec

    spec = ExperimentSpec.parse(run.spec())
    job = backend.render(spec, run.id)[0]
    job["metadata"]["labels"]["kubelab.io/experiment"] = "someoneelse0"
    client.BatchV1Api(admin).delete_namespaced_job(job["metadata"]["name"], namespace,
                                                   propagation_policy="Background")
    client.BatchV1Api(admin).create_namespaced_job(namespace, job)
    with pytest.raises(Conflict) as err:
        backend.submit(run, spec)
    assert "already exists" in err.value.detail


def test_retried_create_that_got_through_is_not_a_conflict(kube_api, lab: Lab, backend,
                                                           namespace: str, home: Path,
                                                           admin) -> None:
    record = lab.submit(SPEC, base_dir=home)
    run = lab.run(record["id"])
    from kubelab.spec import ExperimentSpec

    backend.submit(run, ExperimentSpec.parse(run.spec()))  # 409, but the Job is ours
    assert len(mine(kube_api, "jobs.batch", namespace)) == 1


def test_half_created_experiment_is_cleaned_up(kube_api, lab: Lab, namespace: str,
                                               home: Path) -> None:
    kube_api.fail_next("create", "jobs", 403, message='jobs.batch is forbidden: admission '
                       'webhook "policy.example.org" denied the request')
    with pytest.raises(Forbidden) as err:
        lab.submit(PYTORCH, base_dir=home)
    assert "admission webhook" in err.value.detail
    assert not mine(kube_api, "services", namespace)
    assert not mine(kube_api, "jobs.batch", namespace)


def test_quota_refusal_at_submit(kube_api, lab: Lab, namespace: str, home: Path,
                                 admin) -> None:
    client.CoreV1Api(admin).create_namespaced_resource_quota(namespace, {
        "metadata": {"name": "objects"}, "spec": {"hard": {"count/jobs.batch": "0"}}})
    with pytest.raises(QuotaExceeded) as err:
        lab.submit(PYTORCH, base_dir=home)
    assert "exceeded quota: objects" in err.value.detail
    assert err.value.fields[0].path == "resources"
    assert not mine(kube_api, "services", namespace)


def test_gpu_quota_refusal_of_pods_is_the_pending_reason(kube_api, lab: Lab, namespace: str,
                                                         home: Path, admin) -> None:
    client.CoreV1Api(admin).create_namespaced_resource_quota(namespace, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}})
    record = lab.submit({**SPEC, "resources": {"cpu": "1", "memory": "1Gi", "gpus": 2}},
                        base_dir=home)
    reason = wait_for(lambda: "exceeded quota" in (r := lab.get(record["id"]))["reason"]
                      and r["reason"], what="quota reason")
    assert reason.startswith("exceeded quota: gpus, requested: requests.nvidia.com/gpu=2")
    assert lab.get(record["id"])["status"] == "Pending"
    assert lab.resources()["gpus"]["total"] == 1


def test_watch_410_gone_relists_and_keeps_tracking(kube_api, lab: Lab, backend,
                                                   namespace: str, home: Path) -> None:
    kube_api.add_node("n1", labels={"lab.example.org/project": "vision"})
    record = lab.submit(SPEC, base_dir=home)
    pod = wait_for(lambda: pods_of(kube_api, namespace, record["id"]))[0]["metadata"]["name"]
    relists = backend.watcher.relists
    kube_api.compact_history()
    kube_api.stop()  # cut the watches; they resume from a compacted version and get 410
    kube_api.start()
    wait_for(lambda: backend.watcher.relists > relists, what="a re-list after 410")
    kube_api.run_pod(namespace, pod)
    wait_for(lambda: lab.get(record["id"])["status"] == "Running", what="Running after 410")
    assert backend.watcher.open_watches <= len(backend.watcher.kinds)
