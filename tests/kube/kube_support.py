"""Helpers shared by the kube tests (importable by name, unlike conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kubelab.kube.notebook_env import NotebookEnv

ROLE_FILE = Path(__file__).resolve().parents[2] / "hub_config" / "rbac" / "notebook-role.yaml"
IMAGE = "registry.example.org/lab/notebook:2024.1"


def role_documents(namespace: str, service_account: str) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all(ROLE_FILE.read_text()))
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        for subject in doc.get("subjects") or []:
            subject.update(name=service_account, namespace=namespace)
    return docs


def notebook_env(namespace: str, home: Path, **changes: Any) -> NotebookEnv:
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
        node_selector={"lab.example.org/project": "vision"},
    )
    values.update(changes)
    return NotebookEnv(**values)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    """Poll until `predicate()` is truthy; fail with `what` and the last value otherwise."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or predicate}: last value {value!r}")


def pods_of(server: Any, namespace: str, run_id: str) -> list[dict[str, Any]]:
    pods = [
        p
        for p in server.objects("pods", namespace)
        if p["metadata"]["labels"].get("kubelab.io/experiment") == run_id
    ]
    return sorted(
        pods,
        key=lambda p: (p["metadata"].get("annotations") or {}).get(
            "batch.kubernetes.io/job-completion-index", ""
        ),
    )
