"""Priorities on the real control plane: the kube-scheduler preempts a low run's pod for a high
run on a full KWOK GPU node; the low run shows `Preempted` with the scheduler's words, loses
none of its retries (its Job allows none), and runs again when the GPU comes back.

kubelab's PriorityClasses are applied as an admin applies `kubelab hub render --all`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kube_support import ONE_GPU_RUN, pods_of, start_high, wait_for, wait_running
from kubelab_testing import wait_until

from kubelab.backends.kubernetes.priority_classes import priority_cap_quota
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments

SPEC = {**ONE_GPU_RUN, "retries": 0}


def test_a_high_run_preempts_a_low_one_which_resumes_without_spending_a_retry(
    simulated_cluster: Any,
    project_node: Callable[..., str],
    admin: Any,
    prioritised: Experiments,
    namespace: str,
    home: Path,
) -> None:
    lab = prioritised
    project_node("gpu", gpus=1, gpu_type="A100")
    low = lab.submit({**SPEC, "priority": "low", "name": "sweep-trial"}, base_dir=home)["id"]
    (first,) = wait_running(admin, lab, namespace, low)
    assert first["spec"]["priorityClassName"] == "kubelab-low"
    assert first["spec"]["priority"] == 100  # the API server resolved the class

    high, high_pod = start_high(admin, lab, namespace, home, retries=0)
    record = wait_until(lab, low, "Preempted", timeout=90)
    assert "preempted" in record["reason"], record["reason"]

    # the low run's Job made a replacement at once and did not count the preemption as a failure
    replacement = wait_for(
        lambda: [
            p for p in pods_of(admin, namespace, low) if p["metadata"]["name"] != first["metadata"]["name"]
        ],
        what="the low run's replacement pod",
    )[0]
    assert lab.get(low)["status"] == "Preempted"
    simulated_cluster.end_pod(namespace, high_pod, "Succeeded")
    wait_until(lab, high, "Succeeded")
    wait_until(lab, low, "Running", timeout=90)  # the GPU came back: its next pod runs
    simulated_cluster.end_pod(namespace, replacement["metadata"]["name"], "Succeeded")
    final = wait_until(lab, low, "Succeeded")
    states = [entry["state"] for entry in final["history"]]
    assert "Preempted" in states and states[-2:] == ["Running", "Succeeded"], states


def test_a_cluster_without_the_classes_refuses_a_named_priority_by_field(
    lab: Experiments, home: Path
) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit({**SPEC, "priority": "high"}, base_dir=home)
    (problem,) = caught.value.fields
    assert problem.path == "priority" and "kubelab hub render --all" in problem.reason
    with pytest.raises(ValidationError, match="priority: on Kubernetes a priority is low, normal or high"):
        lab.submit({**SPEC, "priority": 500}, base_dir=home)
    assert lab.list()[0] == []  # nothing was created


def test_a_groups_priority_cap_is_held_by_the_api_server(
    simulated_cluster: Any,
    project_node: Callable[..., str],
    admin: Any,
    prioritised: Experiments,
    namespace: str,
    home: Path,
) -> None:
    """A `max_priority: normal` group's namespace carries the cap quota (as the spawner's bundle
    does): a high run's Job gets no pod, however it was submitted, and says why."""
    cap = priority_cap_quota(namespace, "normal")
    assert cap is not None
    simulated_cluster.apply(cap, f"/api/v1/namespaces/{namespace}/resourcequotas")
    project_node("gpu", gpus=2)
    high = prioritised.submit({**SPEC, "priority": "high"}, base_dir=home)["id"]
    record = wait_until(
        prioritised, high, "Pending", reason="exceeded quota: kubelab-priority-cap", timeout=90
    )
    assert "pods=1" in record["reason"], record["reason"]
    assert pods_of(admin, namespace, high) == []
    normal = prioritised.submit(SPEC, base_dir=home)["id"]
    wait_until(prioritised, normal, "Running", timeout=90)
