"""Job controller, pod lifecycle controls, logs, fault injection and the subprocess mode."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client import ApiException

from .conftest import pod_body


def job_body(name: str, **spec: object) -> dict:
    return {"metadata": {"name": name}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "trainer:1"}]}},
        **spec}}


def job_pods(core, ns: str, job: str) -> list:
    return sorted(core.list_namespaced_pod(ns, label_selector=f"job-name={job}").items,
                  key=lambda p: p.metadata.name)


def test_indexed_job_creates_pods_like_the_job_controller(core, batch, ns) -> None:
    body = job_body("train", completions=4, parallelism=4, completionMode="Indexed")
    body["spec"]["template"]["spec"]["subdomain"] = "train"
    job = batch.create_namespaced_job(ns, body)
    pods = job_pods(core, ns, "train")
    assert [p.spec.hostname for p in pods] == ["train-0", "train-1", "train-2", "train-3"]
    assert {p.spec.subdomain for p in pods} == {"train"}
    for i, pod in enumerate(pods):
        key = "batch.kubernetes.io/job-completion-index"
        assert pod.metadata.annotations[key] == pod.metadata.labels[key] == str(i)
        assert pod.metadata.labels["controller-uid"] == job.metadata.uid
        assert pod.metadata.labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
        assert pod.metadata.owner_references[0].kind == "Job"
        assert pod.status.phase == "Pending"
    assert batch.read_namespaced_job_status("train", ns).status.active == 4


def test_job_completes_when_pods_succeed(kube_api, core, batch, ns) -> None:
    kube_api.add_node("n1")
    batch.create_namespaced_job(ns, job_body("j", completions=2, parallelism=1))
    for _ in range(2):
        (pod,) = [p for p in job_pods(core, ns, "j") if p.status.phase == "Pending"]
        kube_api.succeed_pod(ns, pod.metadata.name)
    status = batch.read_namespaced_job("j", ns).status
    assert status.succeeded == 2 and not status.active
    assert {c.type: c.reason for c in status.conditions}["Complete"] == "CompletionsReached"
    reasons = [e.reason for e in core.list_namespaced_event(
        ns, field_selector="involvedObject.kind=Job").items]
    assert reasons.count("SuccessfulCreate") == 2 and "Completed" in reasons


def test_suspend_and_resume(core, batch, ns) -> None:
    batch.create_namespaced_job(ns, job_body("s", parallelism=2, completions=2, suspend=True))
    assert job_pods(core, ns, "s") == []
    status = batch.read_namespaced_job("s", ns).status
    assert [(c.type, c.status, c.reason) for c in status.conditions] == [
        ("Suspended", "True", "JobSuspended")]
    batch.patch_namespaced_job("s", ns, {"spec": {"suspend": False}})
    assert len(job_pods(core, ns, "s")) == 2
    batch.patch_namespaced_job("s", ns, {"spec": {"suspend": True}})
    assert job_pods(core, ns, "s") == []


def test_backoff_limit(kube_api, core, batch, ns) -> None:
    kube_api.add_node("n1")
    batch.create_namespaced_job(ns, job_body("b", backoffLimit=1))
    for _ in range(2):
        (pod,) = [p for p in job_pods(core, ns, "b") if p.status.phase == "Pending"]
        kube_api.fail_pod(ns, pod.metadata.name, exit_code=137, reason="OOMKilled")
    status = batch.read_namespaced_job("b", ns).status
    assert status.failed == 2 and not status.active
    failed = {c.type: c for c in status.conditions}["Failed"]
    assert failed.reason == "BackoffLimitExceeded"
    assert [p.status.phase for p in job_pods(core, ns, "b")] == ["Failed", "Failed"]
    term = job_pods(core, ns, "b")[0].status.container_statuses[0].state.terminated
    assert (term.exit_code, term.reason) == (137, "OOMKilled")


def test_deleting_a_job_orphans_by_default_and_cascades_when_asked(batch, core, ns) -> None:
    batch.create_namespaced_job(ns, job_body("keep"))
    batch.delete_namespaced_job("keep", ns)
    (orphan,) = job_pods(core, ns, "keep")
    assert not orphan.metadata.owner_references
    batch.create_namespaced_job(ns, job_body("gone"))
    batch.delete_namespaced_job("gone", ns, propagation_policy="Background")
    assert job_pods(core, ns, "gone") == []


def test_quota_blocks_job_pods_with_failed_create_event(kube_api, core, batch, ns) -> None:
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "q"},
                                               "spec": {"hard": {"pods": "1"}}})
    batch.create_namespaced_job(ns, job_body("q", parallelism=2, completions=2))
    assert len(job_pods(core, ns, "q")) == 1
    events = core.list_namespaced_event(ns, field_selector="reason=FailedCreate").items
    assert "exceeded quota: q" in events[0].message


def test_pod_driving(kube_api, core, ns) -> None:
    kube_api.add_node("cpu-1", cpu="4")
    kube_api.add_node("gpu-1", gpus=1)
    core.create_namespaced_pod(ns, pod_body("big", limits={"nvidia.com/gpu": "2"}))
    assert kube_api.schedule_pod(ns, "big") is None
    pod = core.read_namespaced_pod("big", ns)
    (cond,) = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    core.create_namespaced_pod(ns, pod_body("gpu", limits={"nvidia.com/gpu": "1"}))
    pod = kube_api.run_pod(ns, "gpu")
    pod = core.read_namespaced_pod("gpu", ns)
    assert pod.spec.node_name == "gpu-1" and pod.status.phase == "Running"
    assert pod.status.pod_ip and pod.status.container_statuses[0].state.running
    core.create_namespaced_pod(ns, pod_body("pull"))
    kube_api.fail_image_pull(ns, "pull", backoff=True)
    waiting = core.read_namespaced_pod("pull", ns).status.container_statuses[0].state.waiting
    assert waiting.reason == "ImagePullBackOff"
    kube_api.evict_pod(ns, "gpu")
    pod = core.read_namespaced_pod("gpu", ns)
    assert (pod.status.phase, pod.status.reason) == ("Failed", "Evicted")
    assert any(c.type == "DisruptionTarget" for c in pod.status.conditions)


def test_logs_tail_container_and_follow(kube_api, core, ns) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("p", ns)
    assert "is waiting to start: ContainerCreating" in json.loads(err.value.body)["message"]
    kube_api.add_node("n")
    kube_api.run_pod(ns, "p")
    kube_api.append_log(ns, "p", "one", "two", "three")
    assert core.read_namespaced_pod_log("p", ns, tail_lines=2) == "two\nthree\n"
    assert core.read_namespaced_pod_log("p", ns, container="main").startswith("one")
    stream = core.read_namespaced_pod_log("p", ns, follow=True, _preload_content=False)

    def later() -> None:
        kube_api.append_log(ns, "p", "four")
        kube_api.succeed_pod(ns, "p")

    threading.Timer(0.2, later).start()
    assert stream.read().decode() == "one\ntwo\nthree\nfour\n"


def test_async_log_follow(kube_api, tmp_path, core, ns) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig

    kube_api.add_node("n")
    core.create_namespaced_pod(ns, pod_body("p"))
    kube_api.run_pod(ns, "p")
    kube_api.append_log(ns, "p", "epoch 1")
    path = kube_api.write_kubeconfig(tmp_path / "kc")

    async def follow() -> list[str]:
        await aconfig.load_kube_config(config_file=str(path))
        async with aclient.ApiClient() as api:
            resp = await aclient.CoreV1Api(api).read_namespaced_pod_log(
                "p", ns, follow=True, _preload_content=False)
            lines = [(await resp.content.readline()).decode()]
            await asyncio.to_thread(kube_api.append_log, ns, "p", "epoch 2")
            lines.append((await resp.content.readline()).decode())
            await asyncio.to_thread(kube_api.succeed_pod, ns, "p")
            lines.append((await resp.content.readline()).decode())
            return lines

    assert asyncio.run(follow()) == ["epoch 1\n", "epoch 2\n", ""]


def test_fault_injection_and_unreachable(kube_api, core, ns) -> None:
    kube_api.fail_next("create", "pods", status=503, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod(ns, pod_body("p"))
        assert err.value.status == 503
        assert json.loads(err.value.body)["reason"] == "ServiceUnavailable"
    core.create_namespaced_pod(ns, pod_body("p"))
    kube_api.fail_next("get", "pods/log", status=500)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod_log("p", ns)
    assert err.value.status == 500
    core.api_client.rest_client.pool_manager.clear()
    with kube_api.unreachable(), pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespaced_pod(ns, _request_timeout=2)
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["p"]


def test_runs_as_a_subprocess(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    proc = subprocess.Popen([sys.executable, "-m", "kubeapi", "--port", "0", "--kubeconfig",
                             str(kubeconfig)], cwd=Path(__file__).parent.parent,
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        token = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        with config.new_client_from_config(str(kubeconfig)) as api:
            v1 = client.CoreV1Api(api)
            v1.create_namespaced_pod("default", pod_body("p"))
            http = urllib3.PoolManager()
            for method, args in (("add_node", {"name": "n"}),
                                 ("run_pod", {"namespace": "default", "name": "p"})):
                response = http.request("POST", f"{url}/_control/{method}", json=args,
                                        headers={"Authorization": f"Bearer {token}"})
                assert response.status == 200, response.data
            assert v1.read_namespaced_pod("p", "default").status.phase == "Running"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
