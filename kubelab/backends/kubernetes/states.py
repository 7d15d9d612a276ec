"""From Kubernetes status to kubelab states with reasons a person understands.

Pure functions of the objects the watcher caches (a Job or a Kubeflow job, its pods, its
events), so every state and reason is testable without a cluster and every observer (watcher,
`reconcile` after a restart, the CLI) derives the same answer from the same objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubelab.backends.kubernetes.names import (
    ELASTIC_ANNOTATION,
    INDEX_ANNOTATION,
    QUEUE_LABEL,
    RESIZED_ANNOTATION,
    ROLE,
)
from kubelab.records import FAILED, PENDING, PREEMPTED, QUEUED, RUNNING, SUCCEEDED

Obj = dict[str, Any]
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
EXIT_HINTS = {
    126: " (command not executable)",
    127: " (command not found)",
    137: " (killed: SIGKILL)",
    143: " (terminated: SIGTERM)",
}
KUBEFLOW_ROLE = "training.kubeflow.org/replica-type"
KUBEFLOW_INDEX = "training.kubeflow.org/replica-index"


@dataclass
class Observation:
    state: str
    reason: str
    exit_code: int | None = None
    attempt: int = 0
    replicas: list[dict[str, Any]] = field(default_factory=list)
    provisional: bool = False  # the pod that explains it has not been seen yet: wait for it
    size: int | None = None  # an elastic Indexed Job's size (its parallelism), for the timeline


@dataclass
class PodView:
    """One pod, as a person would describe it."""

    role: str
    index: int
    name: str
    phase: str
    reason: str
    exit_code: int | None = None
    disrupted: bool = False
    created: str = ""

    @property
    def label(self) -> str:
        return f"replica {self.index}" if self.role == "worker" else f"{self.role} {self.index}"

    def record(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "index": self.index,
            "pod": self.name,
            "state": self.phase,
            "reason": self.reason,
            "exit_code": self.exit_code,
        }


def _conditions(obj: Obj) -> list[Obj]:
    return (obj.get("status") or {}).get("conditions") or []


def _condition(obj: Obj, type_: str) -> Obj | None:
    for cond in _conditions(obj):
        if cond.get("type") == type_ and cond.get("status") == "True":
            return cond
    return None


def describe_pod(pod: Obj) -> PodView:
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    role = (labels.get(ROLE) or labels.get(KUBEFLOW_ROLE) or "worker").lower()
    role = "worker" if role == "master" else role
    index = annotations.get(INDEX_ANNOTATION) or labels.get(KUBEFLOW_INDEX) or "0"
    index_number = int(index) if str(index).isdigit() else 0
    owners = {ref.get("kind") for ref in meta.get("ownerReferences") or []}
    if "PyTorchJob" in owners and (labels.get(KUBEFLOW_ROLE) or "").lower() == "worker":
        index_number += 1  # PyTorchJob: Master is rank 0, Worker i is rank i + 1
    phase = status.get("phase") or "Pending"
    view = PodView(
        role, index_number, meta.get("name", ""), phase, "", created=meta.get("creationTimestamp") or ""
    )
    disruption = _condition(pod, "DisruptionTarget")
    terminated = _terminated(status)
    waiting = _waiting(status)
    init_failure = _init_failure(status)
    if init_failure is not None and phase in ("Pending", "Failed"):
        view.exit_code = init_failure.get("exitCode")
        detail = (init_failure.get("message") or "").strip().splitlines()
        view.reason = "init steps failed: " + (detail[-1] if detail else f"exited with code {view.exit_code}")
        return view
    if phase == "Pending" and _init_running(status):
        view.reason = "doing its init steps"
    elif phase == "Pending":
        scheduled = next((c for c in _conditions(pod) if c.get("type") == "PodScheduled"), None)
        if scheduled and scheduled.get("status") == "False" and scheduled.get("message"):
            view.reason = scheduled["message"]
        elif waiting and waiting.get("reason") in PULL_FAILURES:
            image = next((c.get("image") for c in (pod.get("spec") or {}).get("containers") or []), "")
            detail = waiting.get("message") or waiting["reason"]
            view.reason = f"cannot pull image '{image}': {detail}"
        elif waiting and waiting.get("reason") not in (None, "ContainerCreating", "PodInitializing"):
            view.reason = f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
        else:
            view.reason = "starting" if scheduled else "waiting to be scheduled"
    elif phase == "Running":
        view.reason = "running"
    elif phase == "Succeeded":
        view.exit_code, view.reason = 0, "succeeded"
    else:
        if terminated is not None:
            view.exit_code = terminated.get("exitCode")
        if status.get("reason") == "Evicted" or disruption is not None:
            view.disrupted = True
            why = (disruption or {}).get("reason") or "Evicted"
            message = status.get("message") or (disruption or {}).get("message") or ""
            verb = "preempted" if "Preemption" in why else "evicted"
            view.reason = f"was {verb}" + (f": {message}" if message else "")
        elif terminated is not None and terminated.get("reason") == "OOMKilled":
            limit = _memory_limit(pod)
            view.reason = "ran out of memory (OOMKilled" + (f", limit {limit})" if limit else ")")
        elif status.get("reason") == "DeadlineExceeded":
            view.reason = "passed its deadline"
        elif view.exit_code is not None:
            code = view.exit_code
            view.reason = f"exited with code {code}{EXIT_HINTS.get(code, '')}"
        else:
            view.reason = status.get("message") or status.get("reason") or "failed"
    return view


def _init_failure(status: Obj) -> Obj | None:
    """An init container that exited non-zero (restartPolicy Never: the pod fails with it)."""
    for ctr in status.get("initContainerStatuses") or []:
        ended = (ctr.get("state") or {}).get("terminated") or {}
        if ended.get("exitCode"):
            return dict(ended)
    return None


def _init_running(status: Obj) -> bool:
    return any("running" in (c.get("state") or {}) for c in status.get("initContainerStatuses") or [])


def _container_status(status: Obj) -> Obj:
    statuses = status.get("containerStatuses") or []
    return statuses[0] if statuses else {}


def _terminated(status: Obj) -> Obj | None:
    ctr = _container_status(status)
    return (ctr.get("state") or {}).get("terminated") or (ctr.get("lastState") or {}).get("terminated")


def _waiting(status: Obj) -> Obj | None:
    return (_container_status(status).get("state") or {}).get("waiting")


def _memory_limit(pod: Obj) -> str | None:
    for ctr in (pod.get("spec") or {}).get("containers") or []:
        limit = ((ctr.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            return str(limit)
    return None


def latest_per_replica(pods: list[Obj]) -> list[PodView]:
    """The newest pod of each (role, index): retries replace pods, they do not add replicas."""

    def age(view: PodView) -> tuple[str, bool, str]:
        # creationTimestamp has one-second resolution: on a tie the live pod is the newer one
        return view.created, view.phase in ("Pending", "Running"), view.name

    views: dict[tuple[str, int], PodView] = {}
    for pod in pods:
        view = describe_pod(pod)
        key = (view.role, view.index)
        if key not in views or age(view) > age(views[key]):
            views[key] = view
    return sorted(views.values(), key=lambda v: (v.role != "worker", v.role, v.index))


FORBIDDEN = " is forbidden: "


def creation_refusal(events: Sequence[Obj]) -> str | None:
    """The latest refusal of pod creation, as the API server worded it: `exceeded quota`, or
    another admission's sentence (a LimitRange's minimum, an admission policy, Pod Security)."""
    for event in reversed(events):
        message = event.get("message") or ""
        if event.get("reason") != "FailedCreate":
            continue
        if "exceeded quota" in message:
            return message[message.index("exceeded quota") :]
        if FORBIDDEN in message:
            return message[message.index(FORBIDDEN) + len(FORBIDDEN) :]
    return None


def preemption(all_views: list[PodView], events: Sequence[Obj], live: set[str]) -> str | None:
    """The latest preemption of a pod this run no longer runs, in the scheduler's words: from
    the pod's DisruptionTarget condition while it is still there, else from the `Preempted`
    event the scheduler left on it (the pod itself is gone by then)."""
    found = [(v.created, v.reason) for v in all_views if v.disrupted and "preempted" in v.reason]
    for event in events:
        involved = event.get("involvedObject") or {}
        mine = involved.get("kind") == "Pod" and involved.get("name") not in live
        if event.get("reason") == "Preempted" and mine:
            when = event.get("lastTimestamp") or event.get("eventTime") or ""
            found.append((when, f"was preempted: {event.get('message') or 'by a higher-priority pod'}"))
    found = [(when, why) for when, why in found if why]
    return max(found)[1] if found else None


def _failure_story(views: list[PodView]) -> PodView | None:
    failed = [v for v in views if v.phase == "Failed"]
    mine = [v for v in failed if not v.disrupted] or failed
    return mine[0] if mine else None


def observe_job(job: Obj, pods: list[Obj], events: Sequence[Obj] = ()) -> Observation:
    """State of a plain (possibly Indexed) Job run: `pods` are all its worker pods."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    worker_pods = [p for p in pods if describe_pod(p).role == "worker"]
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if ELASTIC_ANNOTATION in annotations:
        return _observe_elastic(job, worker_pods, events, annotations)
    views = latest_per_replica(worker_pods)
    all_views = [describe_pod(p) for p in worker_pods]
    records = [v.record() for v in views]
    attempt = int(status.get("failed") or 0)
    if _condition(job, "Complete"):
        return Observation(SUCCEEDED, "completed", 0, attempt, records)
    failed = _condition(job, "Failed")
    if failed:
        story = _failure_story(sorted(all_views, key=lambda v: v.created, reverse=True))
        cause = failed.get("reason")
        if cause == "DeadlineExceeded":
            reason = f"timed out after {spec.get('activeDeadlineSeconds')}s"
            return Observation(FAILED, reason, story.exit_code if story else None, attempt, records)
        if story is None:
            # The Job controller saw the pod fail before our pod watch did: wait for that
            # pod's update rather than settle for a vaguer final reason.
            waiting = any(v.phase in ("Pending", "Running") for v in all_views)
            return Observation(
                FAILED,
                failed.get("message") or cause or "failed",
                None,
                attempt,
                records,
                provisional=waiting,
            )
        reason = f"{story.label} {story.reason}"
        if cause == "BackoffLimitExceeded" and spec.get("backoffLimit"):
            reason += f" (gave up after {attempt} failed attempts)"
        return Observation(FAILED, reason, story.exit_code, attempt, records)
    queue = (job.get("metadata") or {}).get("labels", {}).get(QUEUE_LABEL)
    if _condition(job, "Suspended") or (spec.get("suspend") and not status.get("startTime")):
        reason = f"waiting for quota in queue '{queue}'" if queue else "suspended"
        return Observation(QUEUED, reason, None, attempt, records)
    return _from_pods(views, all_views, events, int(spec.get("completions") or 1), attempt, records)


def _observe_elastic(
    job: Obj, pods: list[Obj], events: Sequence[Obj], annotations: dict[str, str]
) -> Observation:
    """An elastic Indexed Job kubelab resizes: pods above its size are leaving (not its replicas);
    while one replica runs the run is `Running` (a new replica may still be pending), with the
    reason of its last resize and its size (the timeline's)."""
    size = int((job.get("spec") or {}).get("completions") or 1)
    pods = [p for p in pods if describe_pod(p).index < size]
    meta = dict(job.get("metadata") or {}, annotations={})  # observed as a fixed-size Job
    seen = observe_job(dict(job, metadata=meta), pods, events)
    running = any(v.phase == "Running" for v in latest_per_replica(pods))
    if seen.state in (PENDING, PREEMPTED, RUNNING) and running:
        default = f"running {size} of {annotations[ELASTIC_ANNOTATION].partition(':')[2]} replicas"
        seen.state, seen.reason = RUNNING, annotations.get(RESIZED_ANNOTATION) or default
        seen.size = size
    return seen


def _from_pods(
    views: list[PodView],
    all_views: list[PodView],
    events: Sequence[Obj],
    expected: int,
    attempt: int,
    records: list[dict[str, Any]],
) -> Observation:
    active = [v for v in views if v.phase in ("Pending", "Running")]
    done = [v for v in views if v.phase == "Succeeded"]
    retry = ""
    earlier = [v for v in all_views if v.phase == "Failed"]
    if earlier:
        last = max(earlier, key=lambda v: v.created)
        retry = f"; retrying after {last.label} {last.reason}"
    pending = [v for v in active if v.phase == "Pending"]
    if not active and not done or (pending and len(active) + len(done) < expected):
        refusal = creation_refusal(events)
        if refusal:
            return Observation(PENDING, refusal + retry, None, attempt, records)
    preempted = preemption(all_views, events, {v.name for v in active}) if not done else None
    if pending:
        worst = next(
            (v for v in pending if v.reason not in ("starting", "waiting to be scheduled")), pending[0]
        )
        prefix = f"{worst.label}: " if expected > 1 else ""
        if preempted:  # not counted against retries (the Job's pod-failure policy): it waits for room
            return Observation(PREEMPTED, f"{preempted}; {prefix}{worst.reason}", None, attempt, records)
        return Observation(PENDING, prefix + worst.reason + retry, None, attempt, records)
    if active:
        reason = "running" if expected == 1 else f"{len(active)}/{expected} replicas running"
        return Observation(RUNNING, reason + retry, None, attempt, records)
    if done:
        return Observation(RUNNING, f"{len(done)}/{expected} replicas finished", None, attempt, records)
    if preempted:
        return Observation(PREEMPTED, f"{preempted}; its next pod is being made", None, attempt, records)
    return Observation(PENDING, "waiting for pods to be created" + retry, None, attempt, records)


def observe_kubeflow(job: Obj, pods: list[Obj], events: Sequence[Obj] = ()) -> Observation:
    """State of a PyTorchJob or TFJob from its conditions, with pod detail for the reason."""
    views = latest_per_replica(pods)
    records = [v.record() for v in views]
    policy = (job.get("spec") or {}).get("runPolicy") or {}
    if _condition(job, "Succeeded"):
        return Observation(SUCCEEDED, "completed", 0, 0, records)
    failed = _condition(job, "Failed")
    if failed:
        story = _failure_story(views)
        if story is not None:
            return Observation(FAILED, f"{story.label} {story.reason}", story.exit_code, 0, records)
        return Observation(FAILED, failed.get("message") or "failed", None, 0, records)
    queue = (job.get("metadata") or {}).get("labels", {}).get(QUEUE_LABEL)
    if _condition(job, "Suspended") or (policy.get("suspend") and not _condition(job, "Running")):
        reason = f"waiting for quota in queue '{queue}'" if queue else "suspended"
        return Observation(QUEUED, reason, None, 0, records)
    if _condition(job, "Running") and not any(v.phase == "Pending" for v in views):
        return Observation(RUNNING, "running", None, 0, records)
    expected = sum(int(r.get("replicas") or 1) for r in _replica_specs(job).values())
    return _from_pods(views, views, events, expected, 0, records)


def _replica_specs(job: Obj) -> dict[str, Obj]:
    spec = job.get("spec") or {}
    for key, value in spec.items():
        if key.endswith("ReplicaSpecs") and isinstance(value, dict):
            return value
    return {}


def observe(obj: Obj, pods: list[Obj], events: Sequence[Obj] = ()) -> Observation:
    if obj.get("kind") in ("PyTorchJob", "TFJob"):
        return observe_kubeflow(obj, pods, events)
    return observe_job(obj, pods, events)
