"""States and reasons from pod phases driven on the test server (scheduler, kubelet parts)."""

from __future__ import annotations

from pathlib import Path

from kube_support import pods_of, wait_for

from kubelab.lab import Lab

NODE = {"lab.example.org/project": "vision"}


def start(kube_api, lab: Lab, namespace: str, home: Path, **fields) -> tuple[str, str]:
    spec = {"command": ["python", "train.py"],
            "resources": {"cpu": "1", "memory": "1Gi", "gpus": 1}, **fields}
    run_id = lab.submit(spec, base_dir=home)["id"]
    pod = wait_for(lambda: pods_of(kube_api, namespace, run_id))[-1]
    return run_id, pod["metadata"]["name"]


def settle(lab: Lab, run_id: str, state: str, contains: str = "") -> dict:
    seen: list[tuple[str, str]] = []

    def arrived() -> dict | None:
        record = lab.get(run_id)
        seen.append((record["status"], record["reason"]))
        return record if record["status"] == state and contains in record["reason"] else None

    try:
        return wait_for(arrived, what=f"{state} / {contains}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen {seen[-1]}") from None


def test_unschedulable_shows_the_scheduler_message(kube_api, lab, namespace, home) -> None:
    kube_api.add_node("cpu-1", cpu="8", labels=NODE)
    kube_api.add_node("cpu-2", cpu="8", labels=NODE)
    run_id, pod = start(kube_api, lab, namespace, home)
    assert kube_api.schedule_pod(namespace, pod) is None
    record = settle(lab, run_id, "Pending", "nodes are available")
    assert record["reason"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def test_image_pull_failure(kube_api, lab, namespace, home) -> None:
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, pod = start(kube_api, lab, namespace, home, image="registry.example.org/typo:1")
    kube_api.fail_image_pull(namespace, pod, backoff=True)
    record = settle(lab, run_id, "Pending", "cannot pull image")
    assert "registry.example.org/typo:1" in record["reason"]


def test_oom_killed(kube_api, lab, namespace, home) -> None:
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, pod = start(kube_api, lab, namespace, home)
    kube_api.run_pod(namespace, pod)
    kube_api.fail_pod(namespace, pod, exit_code=137, reason="OOMKilled")
    record = settle(lab, run_id, "Failed")
    assert record["reason"] == "replica 0 ran out of memory (OOMKilled, limit 1Gi)"
    assert record["exit_code"] == 137


def test_exit_code_is_reported(kube_api, lab, namespace, home) -> None:
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, pod = start(kube_api, lab, namespace, home)
    kube_api.fail_pod(namespace, pod, exit_code=3)
    record = settle(lab, run_id, "Failed")
    assert record["reason"] == "replica 0 exited with code 3" and record["exit_code"] == 3


def test_failures_are_retried_up_to_retries(kube_api, lab, namespace, home) -> None:
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, first = start(kube_api, lab, namespace, home, retries=1)
    kube_api.fail_pod(namespace, first, exit_code=2)
    second = wait_for(lambda: [p for p in pods_of(kube_api, namespace, run_id)
                               if p["metadata"]["name"] != first])[0]["metadata"]["name"]
    kube_api.run_pod(namespace, second)
    record = settle(lab, run_id, "Running", "retrying after replica 0 exited with code 2")
    assert record["attempt"] == 1
    kube_api.fail_pod(namespace, second, exit_code=2)
    record = settle(lab, run_id, "Failed")
    assert record["reason"] == "replica 0 exited with code 2 (gave up after 2 failed attempts)"


def test_evicted_pods_are_retried(kube_api, lab, namespace, home) -> None:
    # The Job's podFailurePolicy makes a real cluster retry evictions without counting them;
    # the test server counts them against backoffLimit, hence retries=1 here.
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, first = start(kube_api, lab, namespace, home, retries=1)
    kube_api.run_pod(namespace, first)
    kube_api.evict_pod(namespace, first)
    pods = wait_for(lambda: len(p := pods_of(kube_api, namespace, run_id)) == 2 and p,
                    what="a replacement pod")
    record = settle(lab, run_id, "Pending", "was evicted")
    assert "The node was low on resource: memory" in record["reason"]
    second = next(p for p in pods if p["metadata"]["name"] != first)["metadata"]["name"]
    kube_api.succeed_pod(namespace, second)
    assert settle(lab, run_id, "Succeeded")["exit_code"] == 0


def test_deadline_exceeded(kube_api, lab, namespace, home) -> None:
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, pod = start(kube_api, lab, namespace, home, timeout="1s")
    kube_api.run_pod(namespace, pod)
    record = settle(lab, run_id, "Failed")
    assert record["reason"] == "timed out after 1s"


def test_events_are_attached_to_the_experiment(kube_api, lab, namespace, home,
                                               backend) -> None:
    kube_api.add_node("gpu-1", gpus=2, labels=NODE)
    run_id, pod = start(kube_api, lab, namespace, home)
    kube_api.run_pod(namespace, pod)
    run = lab.run(run_id)
    events = wait_for(lambda: [e for e in backend.events(run) if e["reason"] == "Started"],
                      what="the kubelet's Started event")
    assert events[0]["object"] == f"Pod/{pod}"
    reasons = {e["reason"] for e in backend.events(run)}
    assert {"SuccessfulCreate", "Scheduled", "Started"} <= reasons
