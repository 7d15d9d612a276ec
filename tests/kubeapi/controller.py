"""A Job controller: turns batch/v1 Jobs into Pods and pod phases into Job status.

Modelled on kube-controller-manager's: NonIndexed and Indexed completion modes, parallelism,
`suspend` (deleting active pods; resuming recreates them), `backoffLimit`,
`activeDeadlineSeconds`, the Complete/Failed conditions with their reasons, and the labels,
annotations and hostnames the real controller puts on pods. Pods stay Pending until a test
drives them (see `control.py`).
"""

from __future__ import annotations

import copy
import datetime
from typing import TYPE_CHECKING, Any

from . import defaults
from .errors import ApiError

if TYPE_CHECKING:
    from .cluster import Cluster

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
TERMINAL = ("Succeeded", "Failed")


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    stamp = defaults.now()
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastProbeTime": stamp, "lastTransitionTime": stamp}


def _set_condition(status: dict[str, Any], cond: dict[str, Any]) -> bool:
    """Add or update a condition; True if its status changed (worth an event)."""
    conditions = status.setdefault("conditions", [])
    for i, old in enumerate(conditions):
        if old["type"] == cond["type"]:
            if old["status"] == cond["status"]:
                return False
            conditions[i] = cond
            return True
    conditions.append(cond)
    return True


def _has(status: dict[str, Any], type_: str) -> bool:
    return any(c["type"] == type_ and c["status"] == "True" for c in status.get("conditions", []))


def compress_indexes(indexes: set[int]) -> str:
    """`{0,1,2,4}` -> `"0-2,4"`, the format of `status.completedIndexes`."""
    ranges: list[str] = []
    for i in sorted(indexes):
        if ranges and int(ranges[-1].split("-")[-1]) == i - 1:
            ranges[-1] = f"{ranges[-1].split('-')[0]}-{i}"
        else:
            ranges.append(str(i))
    return ",".join(ranges)


def pod_index(pod: dict[str, Any]) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    return int(value) if value is not None else None


class JobController:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        # Pods a job has seen, by job uid: pod uid -> (phase or "", index). Finished pods stay
        # counted after deletion, and active pods that vanish count as failed, as with the real
        # controller's finalizer-based tracking.
        self._seen: dict[str, dict[str, tuple[str, int | None]]] = {}
        self._deleting: set[str] = set()

    def _delete_pod(self, job: dict[str, Any], pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        self._deleting.add(meta["uid"])
        self.cluster.delete(self.cluster.rt("pods"), meta["namespace"], meta["name"])
        self.cluster.record_event(job, "SuccessfulDelete", f"Deleted pod: {meta['name']}",
                                  component="job-controller")

    def deadline_passed(self, job: dict[str, Any]) -> bool:
        deadline = job["spec"].get("activeDeadlineSeconds")
        start = (job.get("status") or {}).get("startTime")
        if not deadline or not start:
            return False
        started = datetime.datetime.strptime(start, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
        elapsed = datetime.datetime.now(datetime.timezone.utc) - started
        return elapsed.total_seconds() >= deadline

    def reconcile(self, namespace: str, name: str) -> None:
        c = self.cluster
        job = c.store.get("jobs.batch", namespace, name)
        if job is None:
            return
        spec, uid = job["spec"], job["metadata"]["uid"]
        status = copy.deepcopy(job.get("status") or {})
        seen = self._seen.setdefault(uid, {})
        pods = [p for p in c.store.list("pods", namespace)
                if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])]
        present = {p["metadata"]["uid"] for p in pods}
        for pod_uid, (phase, index) in list(seen.items()):
            if pod_uid not in present and phase not in TERMINAL:
                # deleted while active: failed, unless we deleted it ourselves
                seen[pod_uid] = ("" if pod_uid in self._deleting else "Failed", index)
                self._deleting.discard(pod_uid)
        for pod in pods:
            seen[pod["metadata"]["uid"]] = (pod["status"].get("phase", ""), pod_index(pod))
        active = [p for p in pods if p["status"].get("phase") not in TERMINAL]
        succeeded = [i for ph, i in seen.values() if ph == "Succeeded"]
        failed = sum(1 for ph, _ in seen.values() if ph == "Failed")
        finished = _has(status, "Complete") or _has(status, "Failed")
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")

        if not finished and spec.get("suspend"):
            for pod in active:
                self._delete_pod(job, pod)
            active = []
            if _set_condition(status, _condition("Suspended", "True", "JobSuspended",
                                                 "Job suspended")):
                c.record_event(job, "Suspended", "Job suspended", component="job-controller")
            status.pop("startTime", None)
        elif not finished:
            if _has(status, "Suspended"):
                _set_condition(status, _condition("Suspended", "False", "JobResumed",
                                                  "Job resumed"))
                c.record_event(job, "Resumed", "Job resumed", component="job-controller")
            status.setdefault("startTime", defaults.now())
            failure = None
            if failed > spec.get("backoffLimit", 6):
                failure = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
            elif self.deadline_passed(dict(job, status=status)):
                failure = ("DeadlineExceeded", "Job was active longer than specified deadline")
            done = (set(range(completions)) <= set(succeeded) if indexed
                    else (len(succeeded) >= completions if completions is not None
                          else bool(succeeded) and not active))
            if failure:
                for pod in active:
                    self._delete_pod(job, pod)
                active = []
                _set_condition(status, _condition("FailureTarget", "True", *failure))
                _set_condition(status, _condition("Failed", "True", *failure))
                c.record_event(job, failure[0], failure[1], "Warning", "job-controller")
            elif done:
                _set_condition(status, _condition("SuccessCriteriaMet", "True",
                                                  "CompletionsReached", "Reached expected "
                                                  "number of succeeded pods"))
                _set_condition(status, _condition("Complete", "True", "CompletionsReached",
                                                  "Reached expected number of succeeded pods"))
                status["completionTime"] = defaults.now()
                c.record_event(job, "Completed", "Job completed", component="job-controller")
            else:
                active += self._create_pods(job, active, succeeded)

        status.update(active=len(active), succeeded=len(succeeded), failed=failed,
                      terminating=0, uncountedTerminatedPods={})
        status["ready"] = sum(1 for p in active if any(
            cond.get("type") == "Ready" and cond.get("status") == "True"
            for cond in p["status"].get("conditions") or []))
        if indexed:
            status["completedIndexes"] = compress_indexes({i for i in succeeded if i is not None})
        for key in ("active", "succeeded", "failed"):
            if not status[key]:
                del status[key]
        if status != job.get("status"):
            c.mutate(c.rt("jobs.batch"), namespace, name, lambda j: j.update(status=status))

    def _create_pods(self, job: dict[str, Any], active: list[dict[str, Any]],
                     succeeded: list[int | None]) -> list[dict[str, Any]]:
        spec = job["spec"]
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed":
            busy = {pod_index(p) for p in active} | set(succeeded)
            pending = [i for i in range(completions) if i not in busy]
            indexes: list[int | None] = pending[:max(0, parallelism - len(active))]
        else:
            remaining = (completions - len(succeeded)) if completions is not None else (
                parallelism if not succeeded else 0)
            indexes = [None] * max(0, min(parallelism, remaining) - len(active))
        created = []
        for index in indexes:
            try:
                pod, _ = self.cluster.create(self.cluster.rt("pods"),
                                             job["metadata"]["namespace"],
                                             self.pod_for(job, index))
            except ApiError as exc:
                self.cluster.record_event(job, "FailedCreate", f"Error creating: {exc.message}",
                                          "Warning", "job-controller")
                break
            self._seen[job["metadata"]["uid"]][pod["metadata"]["uid"]] = ("Pending", index)
            self.cluster.record_event(job, "SuccessfulCreate",
                                      f"Created pod: {pod['metadata']['name']}",
                                      component="job-controller")
            created.append(pod)
        return created

    @staticmethod
    def pod_for(job: dict[str, Any], index: int | None) -> dict[str, Any]:
        """The pod the Job controller creates from the template (for one completion index)."""
        template = copy.deepcopy(job["spec"].get("template") or {})
        meta = template.get("metadata") or {}
        name = job["metadata"]["name"]
        labels = dict(meta.get("labels") or {})
        annotations = dict(meta.get("annotations") or {})
        spec = template.get("spec") or {}
        prefix = f"{name}-"
        if index is not None:
            labels[INDEX_KEY] = annotations[INDEX_KEY] = str(index)
            prefix = f"{name}-{index}-"
            spec["hostname"] = f"{name}-{index}"
            for ctr in spec.get("containers") or []:
                env = ctr.setdefault("env", [])
                if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                    env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}})
        return {"apiVersion": "v1", "kind": "Pod", "spec": spec, "metadata": {
            "generateName": prefix, "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": job["metadata"]["uid"], "controller": True,
                                 "blockOwnerDeletion": True}]}}
