"""States and reasons as the real scheduler, Job controller and (simulated) kubelet produce
them: the scheduler's own words for an unschedulable pod, exit codes, retries, evictions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from controlplane.cluster import ControlPlane
from kube_support import pods_of, start, wait_for
from kubelab_testing import wait_until
from kubernetes import client

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.experiments import Experiments


def test_unschedulable_shows_the_scheduler_message(
    project_node: Callable[..., str], admin: client.ApiClient, lab: Experiments, namespace: str, home: Path
) -> None:
    project_node("cpu", cpu="8")
    project_node("cpu", cpu="8")
    run_id, pod = start(admin, lab, namespace, home)
    record = wait_until(lab, run_id, "Pending", reason="nodes are available")
    # the scheduler's own sentence: this test's two nodes lack GPUs, the rest are not selected
    assert record["reason"].startswith("0/"), record["reason"]
    assert "2 Insufficient nvidia.com/gpu" in record["reason"]
    assert "didn't match Pod's node affinity/selector" in record["reason"]


def test_image_pull_failure(
    project_node: Callable[..., str], admin: client.ApiClient, lab: Experiments, namespace: str, home: Path
) -> None:
    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home, image="registry.example.org/unpullable/typo:1")
    record = wait_until(lab, run_id, "Pending", reason="cannot pull image")
    assert "registry.example.org/unpullable/typo:1" in record["reason"]


def test_oom_killed(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home)
    wait_until(lab, run_id, "Running")
    simulated_cluster.end_pod(namespace, pod, "Failed", exit_code=137, reason="OOMKilled")
    record = wait_until(lab, run_id, "Failed")
    assert record["reason"] == "replica 0 ran out of memory (OOMKilled, limit 1Gi)"
    assert record["exit_code"] == 137


def test_exit_code_is_reported(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home)
    wait_until(lab, run_id, "Running")
    simulated_cluster.end_pod(namespace, pod, "Failed", exit_code=3)
    record = wait_until(lab, run_id, "Failed")
    assert record["reason"] == "replica 0 exited with code 3" and record["exit_code"] == 3


def test_failures_are_retried_up_to_retries(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    project_node("gpu", gpus=2)
    run_id, first = start(admin, lab, namespace, home, retries=1)
    wait_until(lab, run_id, "Running")
    simulated_cluster.end_pod(namespace, first, "Failed", exit_code=2)
    # the Job controller makes the replacement after its own back-off (about 10 s)
    second = wait_for(
        lambda: [p for p in pods_of(admin, namespace, run_id) if p["metadata"]["name"] != first],
        timeout=60,
        what="the replacement pod",
    )[0]["metadata"]["name"]
    record = wait_until(lab, run_id, "Running", reason="retrying after replica 0 exited with code 2")
    assert record["attempt"] == 1
    simulated_cluster.end_pod(namespace, second, "Failed", exit_code=2)
    record = wait_until(lab, run_id, "Failed")
    assert record["reason"] == "replica 0 exited with code 2 (gave up after 2 failed attempts)"


def test_evicted_pods_are_retried_without_counting(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    # The Job's podFailurePolicy ignores disruptions: with retries=0 an eviction still
    # gets a replacement pod, which the real Job controller proves here.
    project_node("gpu", gpus=2)
    run_id, first = start(admin, lab, namespace, home)
    wait_until(lab, run_id, "Running")
    simulated_cluster.end_pod(namespace, first, "Evicted")
    second = wait_for(
        lambda: [p for p in pods_of(admin, namespace, run_id) if p["metadata"]["name"] != first],
        timeout=60,
        what="a replacement pod",
    )[0]["metadata"]["name"]
    record = lab.get(run_id)
    assert record["status"] in ("Pending", "Running"), record
    simulated_cluster.end_pod(namespace, second, "Succeeded")
    assert wait_until(lab, run_id, "Succeeded")["exit_code"] == 0


def test_deadline_exceeded(
    project_node: Callable[..., str], admin: client.ApiClient, lab: Experiments, namespace: str, home: Path
) -> None:
    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home, timeout="1s")
    record = wait_until(lab, run_id, "Failed")
    assert record["reason"] == "timed out after 1s"


def test_events_are_attached_to_the_experiment(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    backend: KubernetesBackend,
) -> None:
    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home)
    run = lab.run(run_id)
    events = wait_for(
        lambda: [e for e in backend.events(run) if e["reason"] == "Started"],
        what="the kubelet's Started event",
    )
    assert events[0]["object"] == f"Pod/{pod}"
    reasons = {e["reason"] for e in backend.events(run)}
    assert {"SuccessfulCreate", "Scheduled", "Started"} <= reasons


def test_pod_failure_policy_fails_at_once_on_command_not_found(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    # exit 127 (command not found) cannot get better on a retry: the Job's podFailurePolicy
    # makes the real Job controller fail the Job at once, whatever `retries` says
    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home, retries=3)
    wait_until(lab, run_id, "Running")
    simulated_cluster.end_pod(namespace, pod, "Failed", exit_code=127)
    record = wait_until(lab, run_id, "Failed")
    assert record["exit_code"] == 127
    assert len(pods_of(admin, namespace, run_id)) <= 1  # no replacement pod was made


def test_a_finished_job_removed_by_its_ttl_keeps_its_record(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
) -> None:
    from kube_support import objects
    from kubernetes import client

    project_node("gpu", gpus=2)
    run_id, pod = start(admin, lab, namespace, home)
    wait_until(lab, run_id, "Running")
    simulated_cluster.append_log(namespace, pod, "final loss 0.1")
    simulated_cluster.end_pod(namespace, pod, "Succeeded")
    wait_until(lab, run_id, "Succeeded")
    (job,) = objects(admin, "jobs", namespace, f"kubelab.io/experiment={run_id}")
    # the week kubelab asks for, shortened: the real TTL-after-finished controller deletes it
    client.BatchV1Api(admin).patch_namespaced_job(
        job["metadata"]["name"], namespace, {"spec": {"ttlSecondsAfterFinished": 0}}
    )
    wait_for(
        lambda: not objects(admin, "jobs", namespace, f"kubelab.io/experiment={run_id}"),
        what="the TTL controller's delete",
    )
    record = lab.get(run_id)
    assert record["status"] == "Succeeded" and record["exit_code"] == 0
    assert "final loss 0.1" in "".join(lab.logs(run_id))
