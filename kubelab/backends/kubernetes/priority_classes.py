"""A run's priority on a cluster: kubelab's PriorityClasses, and Kueue's where a queue admits it.

The kube-scheduler preempts lower-priority pods for a higher one that does not fit; the Job's
pod-failure policy (`builders.pod_failure_policy`) does not count that disruption against
`retries`, and the Job controller makes the replacement pod at once, which waits for room. So
`low`, `normal` and `high` mean on a cluster what they mean on one machine (kubelab.priorities),
with the scheduler doing what the local ledger does. An admin applies the classes once
(`kubelab hub render --all`); the hub tells notebooks they exist (`KUBELAB_PRIORITY_CLASSES`).
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import FieldError
from kubelab.priorities import LOW_PRIORITY, PRIORITY_NAMES, priority_name

Manifest = dict[str, Any]
PREFIX = "kubelab-"
NOTEBOOK_CLASS = "kubelab-notebook"
NOTEBOOK_PRIORITY = 100_000  # above every run: a run never preempts a notebook
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
DESCRIPTIONS = {
    "low": "kubelab: preemptible work that yields its GPUs to normal and high runs",
    "normal": "kubelab: the default for runs and notebooks",
    "high": "kubelab: deadline work; preempts low runs when GPUs are short",
}


def class_name(priority: int) -> str | None:
    """`kubelab-high` for a named priority; None for another number (no class holds it)."""
    name = priority_name(priority)
    return PREFIX + name if name in PRIORITY_NAMES else None


def priority_problem(priority: int, classes: bool) -> FieldError | None:
    """Why a cluster cannot give this priority, or None."""
    name = priority_name(priority)
    if name not in PRIORITY_NAMES:
        return FieldError(
            "priority",
            f"on Kubernetes a priority is low, normal or high (kubelab's PriorityClasses), not {name}",
        )
    if not classes and name != "normal":
        return FieldError(
            "priority",
            f"this cluster has no kubelab PriorityClasses, so '{name}' cannot be honoured; an admin "
            "applies them with `kubelab hub render --all` and sets KubeLabSpawner.priority_classes",
        )
    return None


def priority_classes() -> list[Manifest]:
    """The cluster's `kubelab-low/normal/high` and `kubelab-notebook` (scheduling.k8s.io/v1).
    A low run never preempts; a notebook is preempted by no run and preempts none."""
    classes = [(PREFIX + name, value, DESCRIPTIONS[name]) for name, value in PRIORITY_NAMES.items()]
    classes.append((NOTEBOOK_CLASS, NOTEBOOK_PRIORITY, "kubelab: notebooks; runs never preempt them"))
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "kubelab"}},
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": (
                "PreemptLowerPriority" if LOW_PRIORITY < value < NOTEBOOK_PRIORITY else "Never"
            ),
            "description": description,
        }
        for name, value, description in classes
    ]


def workload_priority_classes() -> list[Manifest]:
    """Kueue's WorkloadPriorityClasses of the same names and values: a queued run's priority
    among the workloads Kueue admits and preempts (kueue.x-k8s.io/v1beta1)."""
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": PREFIX + name, "labels": {"app.kubernetes.io/managed-by": "kubelab"}},
            "value": value,
            "description": DESCRIPTIONS[name],
        }
        for name, value in PRIORITY_NAMES.items()
    ]


def priority_cap_quota(namespace: str, cap: str | None) -> Manifest | None:
    """A ResourceQuota that lets no pod of a class above the group's cap into the namespace:
    the API server, not kubelab, holds members to it (a Job asking for more gets no pod)."""
    if cap is None or cap not in PRIORITY_NAMES:
        return None
    above = [PREFIX + name for name, value in PRIORITY_NAMES.items() if value > PRIORITY_NAMES[cap]]
    if not above:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "kubelab-priority-cap", "namespace": namespace},
        "spec": {
            "hard": {"pods": "0"},
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": above}]
            },
        },
    }
