"""Helpers shared by the kube tests (importable by name, unlike conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from kubelab_testing import wait_until
from kubernetes import client

from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.experiments import Experiments

T = TypeVar("T")

ROLE_FILE = Path(__file__).resolve().parents[2] / "hub_config" / "rbac" / "notebook-role.yaml"
IMAGE = "registry.example.org/lab/notebook:2024.1"
PROJECT_LABEL = "lab.example.org/project"
ONE_GPU_RUN: dict[str, Any] = {
    "command": ["python", "train.py"],
    "resources": {"cpu": "1", "memory": "1Gi", "gpus": 1},
}


def role_documents(namespace: str, service_account: str) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all(ROLE_FILE.read_text()))
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects") or []:
            subject.update(name=service_account, namespace=namespace)
    return docs


def notebook_env(namespace: str, home: Path, **changes: Any) -> NotebookEnv:
    """The notebook's settings; its project (node selector) is the namespace, so a test's
    pods land only on the nodes that test made (`project_node`)."""
    values: dict[str, Any] = dict(
        namespace=namespace,
        image=IMAGE,
        user="alice",
        project="vision",
        volumes=[
            {"name": "workspace", "persistentVolumeClaim": {"claimName": "home-alice"}},
            {"name": "archive", "persistentVolumeClaim": {"claimName": "archive-alice"}},
        ],
        mounts=[
            {"name": "workspace", "mountPath": "/mnt/alice", "subPath": "alice"},
            {"name": "archive", "mountPath": "/archives/alice"},
        ],
        shm="2Gi",
        home=str(home),
        node_selector={PROJECT_LABEL: namespace},
    )
    values.update(changes)
    return NotebookEnv(**values)


def wait_for(predicate: Callable[[], T | None | Literal[False]], timeout: float = 30.0, what: str = "") -> T:
    """Poll until `predicate()` is truthy; fail with `what` and the last value otherwise."""
    deadline = time.monotonic() + timeout
    value: T | None | Literal[False] = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what or predicate}: last value {value!r}")


def objects(
    admin: client.ApiClient, kind: str, namespace: str, selector: str | None = None
) -> list[dict[str, Any]]:
    """Live objects of `kind` (pods, services, jobs, pvcs, …) as plain dicts."""
    core, batch = client.CoreV1Api(admin), client.BatchV1Api(admin)
    listing = {
        "pods": core.list_namespaced_pod,
        "services": core.list_namespaced_service,
        "jobs": batch.list_namespaced_job,
        "secrets": core.list_namespaced_secret,
        "configmaps": core.list_namespaced_config_map,
        "pvcs": core.list_namespaced_persistent_volume_claim,
    }[kind]
    found: Any = listing(namespace, label_selector=selector or "")
    items = found.items
    return [admin.sanitize_for_serialization(item) for item in items]


def pods_of(admin: client.ApiClient, namespace: str, run_id: str) -> list[dict[str, Any]]:
    """An experiment's live pods, in completion-index order."""
    pods = [
        p
        for p in objects(admin, "pods", namespace, f"kubelab.io/experiment={run_id}")
        if not p["metadata"].get("deletionTimestamp")
    ]
    return sorted(
        pods,
        key=lambda p: (
            (p["metadata"].get("annotations") or {}).get("batch.kubernetes.io/job-completion-index", ""),
            p["metadata"]["creationTimestamp"],
        ),
    )


def start(
    admin: client.ApiClient, lab: Experiments, namespace: str, home: Path, **fields: Any
) -> tuple[str, str]:
    """Submit a one-GPU run (`fields` over ONE_GPU_RUN) and wait for its pod: (run id, the pod's name)."""
    run_id: str = lab.submit({**ONE_GPU_RUN, **fields}, base_dir=home)["id"]
    pod = wait_for(lambda: pods_of(admin, namespace, run_id))[-1]
    return run_id, pod["metadata"]["name"]


def running_pods(
    admin: client.ApiClient, namespace: str, run_id: str, count: int = 1, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Wait until the run has `count` live pods, each in phase Running (placed, and started by
    KWOK): those pods as read then, so each names its node."""

    def all_running() -> list[dict[str, Any]] | None:
        pods = pods_of(admin, namespace, run_id)
        running = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if running else None

    return wait_for(all_running, timeout, what=f"{count} running pod(s) of {run_id}")


def wait_running(
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    run_id: str,
    count: int = 1,
    timeout: float = 60.0,
    reason: str = "",
) -> list[dict[str, Any]]:
    """Wait until `count` pods of the run are Running and its record says so (`Running`, with
    `reason` in its reason): the pods."""
    pods = running_pods(admin, namespace, run_id, count, timeout)
    wait_until(lab, run_id, "Running", timeout=timeout, reason=reason)
    return pods


def start_high(
    admin: client.ApiClient, lab: Experiments, namespace: str, home: Path, **fields: Any
) -> tuple[str, str]:
    """Submit a high-priority one-GPU run named `deadline` (`fields` over ONE_GPU_RUN) and wait
    until it runs, on a GPU a lower run may first have to give up: (run id, its pod's name)."""
    spec = {**ONE_GPU_RUN, "priority": "high", "name": "deadline", **fields}
    run_id = str(lab.submit(spec, base_dir=home)["id"])
    (pod,) = wait_running(admin, lab, namespace, run_id, timeout=90)
    return run_id, pod["metadata"]["name"]
