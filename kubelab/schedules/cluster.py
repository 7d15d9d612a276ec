"""A schedule's objects on the cluster: create, suspend, read back and delete them.

The thin adapter between the schedule service and the API server, with the notebook's own
credentials (the backend's `ClusterAccess`): the objects come from the pure builder
`kubelab.backends.kubernetes.cronjob`. A refusal (a notebook Role older than the CronJob rules, a quota)
is reported naming the object and the reason, and whatever was created is deleted again.
"""

from __future__ import annotations

import contextlib
from typing import Any

from kubelab.backends.base import ClusterAccess
from kubelab.backends.kubernetes import cronjob
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.errors import FieldError, KubelabError, ValidationError
from kubelab.records import FAILED, PENDING, RUNNING, SUCCEEDED
from kubelab.schedules.spec import Schedule

Obj = dict[str, Any]
RUNS_SHOWN = 10


class ClusterSchedules:
    """The CronJobs of one user's namespace, through the notebook's ServiceAccount."""

    def __init__(self, cluster: ClusterAccess) -> None:
        from kubernetes import client

        self.nb = cluster.nb
        self.api: KubeApi = cluster.api
        self.batch = client.BatchV1Api(self.api.client)
        self.core = client.CoreV1Api(self.api.client)
        self.rbac = client.RbacAuthorizationV1Api(self.api.client)

    @property
    def namespace(self) -> str:
        return self.api.namespace

    def objects(self, schedule_id: str, name: str, schedule: Schedule, paused: bool) -> list[Obj]:
        return cronjob.build(schedule_id, name, schedule, paused, self.nb)

    def create(self, objects: list[Obj]) -> None:
        """Create in order; on a refusal delete what was created and raise naming the object."""
        from kubernetes.client.exceptions import ApiException

        created: list[Obj] = []
        try:
            for obj in objects:
                self._call("create", obj["kind"], self.namespace, obj)
                created.append(obj)
        except ApiException as exc:
            self.delete(created)
            what = f"{obj['kind']}/{obj['metadata']['name']}"
            reason = _reason(exc)
            if exc.status == 403:
                reason += (
                    "; the notebook's Role must allow CronJobs, ServiceAccounts, Roles and "
                    "RoleBindings (hub_config/rbac/notebook-role.yaml): restart the notebook "
                    "server so the hub applies the current Role"
                )
            raise ValidationError(
                "cannot create the schedule on the cluster", [FieldError(f"schedule ({what})", reason)]
            ) from exc

    def delete(self, objects: list[Obj]) -> None:
        """Delete in reverse order (the CronJob first, with its Jobs); gone already is fine."""
        from kubernetes.client.exceptions import ApiException

        failures = []
        for obj in reversed(objects):
            try:
                self._call(
                    "delete",
                    obj["kind"],
                    obj["metadata"]["name"],
                    self.namespace,
                    body={"propagationPolicy": "Background"},
                )
            except ApiException as exc:
                if exc.status != 404:
                    failures.append(FieldError(f"{obj['kind']}/{obj['metadata']['name']}", _reason(exc)))
        if failures:
            raise ValidationError("cannot delete the schedule's objects", failures)

    def suspend(self, cronjob_name: str, suspended: bool) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.api.call(
                self.batch.patch_namespaced_cron_job,
                cronjob_name,
                self.namespace,
                {"spec": {"suspend": suspended}},
            )
        except ApiException as exc:
            raise KubelabError(
                f"cannot {'pause' if suspended else 'resume'} CronJob {cronjob_name}: {_reason(exc)}"
            ) from exc

    def status(self, schedule_id: str, cronjob_name: str) -> Obj:
        """What the cluster says: suspended, the last schedule time and the latest runs (Jobs)."""
        from kubernetes.client.exceptions import ApiException

        found: Obj = {"cronjob": cronjob_name, "namespace": self.namespace}
        try:
            job = self.api.call(self.batch.read_namespaced_cron_job, cronjob_name, self.namespace)
            jobs = self.api.call(
                self.batch.list_namespaced_job,
                self.namespace,
                label_selector=f"kubelab.io/schedule={schedule_id}",
            ).items
        except ApiException as exc:
            return {**found, "error": "missing" if exc.status == 404 else _reason(exc)}
        except KubelabError as exc:  # the API server is unreachable: list the rest anyway
            return {**found, "error": exc.message()}
        found.update(
            suspend=bool(job.spec.suspend),
            last_schedule=_iso(job.status.last_schedule_time),
            last_success=_iso(job.status.last_successful_time),
        )
        runs = sorted(jobs, key=lambda j: j.metadata.creation_timestamp)[-RUNS_SHOWN:]
        found["runs"] = [
            {
                "job": j.metadata.name,
                "state": _job_state(j.status),
                "created_at": _iso(j.metadata.creation_timestamp),
                "finished_at": _iso(j.status.completion_time),
            }
            for j in runs
        ]
        return found

    def _call(self, verb: str, kind: str, *args: Any, **kwargs: Any) -> Any:
        api, noun = {
            "ServiceAccount": (self.core, "service_account"),
            "Role": (self.rbac, "role"),
            "RoleBinding": (self.rbac, "role_binding"),
            "CronJob": (self.batch, "cron_job"),
        }[kind]
        return self.api.call(getattr(api, f"{verb}_namespaced_{noun}"), *args, **kwargs)


def _job_state(status: Any) -> str:
    for condition in status.conditions or []:
        if condition.status == "True" and condition.type in ("Complete", "Failed"):
            return SUCCEEDED if condition.type == "Complete" else FAILED
    return RUNNING if status.active else PENDING


def _reason(exc: Any) -> str:
    import json

    with contextlib.suppress(ValueError, TypeError, AttributeError):
        message = json.loads(exc.body).get("message")
        if message:
            return str(message)
    return f"{exc.status} {exc.reason}"


def _iso(moment: Any) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else None
