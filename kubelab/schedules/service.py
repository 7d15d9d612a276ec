"""Schedules as a service: create, list, pause, resume and remove; and what a fire starts.

A schedule is `$KUBELAB_HOME/schedules/<id>/`: `schedule.json` (what to start: kind,
spec, params, folder, and the schedule itself; never changed) and `state.json` (paused,
the last moment considered, recent fires), written under `state.lock`. On one machine a
per-user scheduler process fires them (`kubelab.schedules.scheduler`); on Kubernetes a
CronJob does (`kubelab.backends.kubernetes.cronjob`, created by `kubelab.schedules.cluster`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelab.driver_store import RUNNING, flock, write_json
from kubelab.errors import Conflict, FieldError, NotFound, ValidationError
from kubelab.experiments import RUN_ID, Experiments
from kubelab.records import iso, new_id, utcnow
from kubelab.schedules.spec import Schedule, parse_schedule

if TYPE_CHECKING:
    from kubelab.schedules.cluster import ClusterSchedules

KINDS = ("experiment", "sweep", "pipeline")
HISTORY = 50  # fires remembered per schedule


def kind_of(data: Any) -> str:
    """What a spec document describes: a pipeline (steps), a sweep (trial / NNI) or an experiment."""
    if isinstance(data, dict) and "steps" in data:
        return "pipeline"
    if isinstance(data, dict) and ("trial" in data or "trialCommand" in data or set(data) == {"nni"}):
        return "sweep"
    return "experiment"


class ScheduleDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.id = self.path.name

    @property
    def definition_file(self) -> Path:
        return self.path / "schedule.json"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    def exists(self) -> bool:
        return self.state_file.exists()

    def definition(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.definition_file.read_text())  # written by create()
        return data

    def schedule(self) -> Schedule:
        schedule, _ = parse_schedule(self.definition()["schedule"])
        assert schedule is not None
        return schedule

    def cronjob(self) -> str | None:
        """The CronJob that fires this schedule on the cluster; None for the local scheduler."""
        for obj in self.definition().get("objects") or []:
            if obj["kind"] == "CronJob":
                return str(obj["metadata"]["name"])
        return None

    def fired_here(self) -> bool:
        """Active and fired by this machine's scheduler process (not by a CronJob)."""
        return not self.read_state()["paused"] and self.cronjob() is None

    def read_state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.state_file.read_text())  # written by write_state()
        return state

    def write_state(self, state: dict[str, Any]) -> None:
        write_json(self.state_file, state)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        with flock(self.path / "state.lock", blocking=True):
            yield


class Schedules:
    def __init__(self, lab: Experiments):
        self.lab = lab
        self.root = lab.home / "schedules"

    def all(self) -> list[ScheduleDirectory]:
        try:
            names = sorted(p.name for p in self.root.iterdir() if not p.name.startswith("."))
        except FileNotFoundError:
            return []
        return [s for s in (ScheduleDirectory(self.root / n) for n in names) if s.exists()]

    def get_dir(self, schedule_id: str) -> ScheduleDirectory:
        if not isinstance(schedule_id, str) or not RUN_ID.match(schedule_id):
            raise NotFound(f"no schedule '{schedule_id}'", [FieldError("id", "is not a schedule id")])
        found = ScheduleDirectory(self.root / schedule_id)
        if not found.exists():
            raise NotFound(f"no schedule '{schedule_id}'")
        return found

    # -- creating -------------------------------------------------------------------------
    def create(
        self,
        kind: str | None,
        data: Any,
        base_dir: Path | None = None,
        confine: bool = False,
        params: dict[str, Any] | None = None,
        start_scheduler: bool = True,
    ) -> dict[str, Any]:
        """Validate the schedule and what it starts (as a run would be validated), then record it."""
        from kubelab.formats.polyaxon_dag import translate

        base = Path(base_dir or Path.cwd()).resolve()
        data = translate(data, base)  # a Polyaxon DAG is a pipeline; its schedule: section ours
        if not isinstance(data, dict):
            raise ValidationError("invalid spec", [FieldError("", "must be a mapping of fields")])
        kind = kind or kind_of(data)
        if kind not in KINDS:
            reason = f"must be one of {', '.join(KINDS)}"
            raise ValidationError("invalid schedule", [FieldError("kind", reason)])
        body = {k: v for k, v in data.items() if k != "schedule"}
        schedule, problems = parse_schedule(data.get("schedule"))
        if schedule is None and not problems:
            problems = [FieldError("schedule", "is required: {cron: '0 2 * * *', ...}")]
        try:
            self.check(kind, body, base, confine, params or {})
        except ValidationError as exc:
            problems += exc.fields
        argo = kind == "pipeline" and body.get("engine") == "argo"
        if argo and not any(p.path == "engine" for p in problems):
            problems.append(
                FieldError(
                    "engine",
                    "argo: a schedule fires under its own least-privilege "
                    "account, which may not submit Workflows; schedule the pipeline "
                    "with engine: driver (its steps run as Jobs)",
                )
            )
        if problems:
            raise ValidationError(f"invalid {kind} schedule", problems)
        assert schedule is not None
        schedule_id = new_id()
        name = body.get("name") or kind
        cluster = self.cluster()
        objects = cluster.objects(schedule_id, name, schedule, False) if cluster else []  # refuses first
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".{schedule_id}.new"
        staging.mkdir()
        try:
            folder = ScheduleDirectory(staging)
            write_json(
                folder.definition_file,
                {
                    "kind": kind,
                    "name": name,
                    "spec": body,
                    "params": params or {},
                    "base_dir": str(base),
                    "confine": confine,
                    "user": self.lab.user,
                    "schedule": schedule.to_dict(),
                    "created_at": utcnow(),
                    "objects": [
                        {"kind": o["kind"], "metadata": {"name": o["metadata"]["name"]}} for o in objects
                    ],
                },
            )
            folder.write_state({"paused": False, "considered": time.time(), "fires": []})
            staging.rename(self.root / schedule_id)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        if cluster:
            try:
                cluster.create(objects)  # the CronJob's pod reads schedule.json, written above
            except BaseException:
                shutil.rmtree(self.root / schedule_id, ignore_errors=True)
                raise
            return self.record(ScheduleDirectory(self.root / schedule_id))
        if start_scheduler:
            from kubelab.schedules.process import ensure_running

            ensure_running(self.lab.home)
        return self.record(ScheduleDirectory(self.root / schedule_id))

    def cluster(self) -> ClusterSchedules | None:
        """Where the backend has a Kubernetes namespace a schedule is a CronJob; None on one machine."""
        cluster = self.lab.backend.cluster()
        if cluster is None:
            return None
        from kubelab.schedules.cluster import ClusterSchedules

        return ClusterSchedules(cluster)

    def check(
        self, kind: str, body: dict[str, Any], base: Path, confine: bool, params: dict[str, Any]
    ) -> None:
        if kind == "pipeline":
            from kubelab.pipelines.service import Pipelines

            Pipelines(self.lab).validate(body, base, confine, params)
        elif kind == "sweep":
            from kubelab.sweeps.service import Sweeps

            Sweeps(self.lab).validate(body, base, confine)
        else:
            if params:
                body = {**body, "params": {**(body.get("params") or {}), **params}}
            self.lab.prepare(body, base, confine)

    # -- reading --------------------------------------------------------------------------
    def list(self) -> list[dict[str, Any]]:
        return [self.record(s) for s in self.all()]

    def record(self, folder: ScheduleDirectory) -> dict[str, Any]:
        definition, state = folder.definition(), folder.read_state()
        schedule = folder.schedule()
        upcoming = None if state["paused"] else schedule.next_after(max(time.time(), state["considered"]))
        record = {
            "id": folder.id,
            "name": definition["name"],
            "kind": definition["kind"],
            **{k: definition["schedule"][k] for k in ("cron", "timezone", "concurrency", "start", "end")},
            "paused": state["paused"],
            "next_at": iso(upcoming) if upcoming else None,
            "fires": state["fires"][-10:],
            "created_at": definition["created_at"],
            "user": definition["user"],
        }
        cronjob = folder.cronjob()
        record["fired_by"] = "cronjob" if cronjob else "scheduler"
        cluster = self.cluster() if cronjob else None
        if cronjob and cluster:
            record["cluster"] = cluster.status(folder.id, cronjob)
        return record

    # -- changing -------------------------------------------------------------------------
    def pause(self, schedule_id: str) -> dict[str, Any]:
        return self._set_paused(schedule_id, True)

    def resume(self, schedule_id: str) -> dict[str, Any]:
        """Fire again from now on; fires missed while paused are not caught up."""
        return self._set_paused(schedule_id, False)

    def _set_paused(self, schedule_id: str, paused: bool) -> dict[str, Any]:
        folder = self.get_dir(schedule_id)
        with folder.locked():
            state = folder.read_state()
            if state["paused"] == paused:
                raise Conflict(f"schedule '{schedule_id}' is already {'paused' if paused else 'active'}")
            cronjob = folder.cronjob()
            if cronjob:
                self._require_cluster(folder).suspend(cronjob, paused)
            state["paused"] = paused
            if not paused:
                state["considered"] = time.time()
            folder.write_state(state)
        if not paused and not folder.cronjob():
            from kubelab.schedules.process import ensure_running

            ensure_running(self.lab.home)
        return self.record(folder)

    def remove(self, schedule_id: str) -> None:
        """Forget the schedule (on a cluster: delete its CronJob, with the Jobs it made, and its
        ServiceAccount, Role and RoleBinding); what a local fire started keeps running."""
        folder = self.get_dir(schedule_id)
        with folder.locked():
            if folder.cronjob():
                self._require_cluster(folder).delete(folder.definition()["objects"])
            shutil.rmtree(folder.path, ignore_errors=True)

    def _require_cluster(self, folder: ScheduleDirectory) -> ClusterSchedules:
        cluster = self.cluster()
        if cluster is None:
            raise ValidationError(
                f"schedule '{folder.id}' is a CronJob on the cluster",
                [
                    FieldError(
                        "KUBELAB_BACKEND",
                        f"must be kubernetes to change it (this process uses {self.lab.backend.name})",
                    )
                ],
            )
        return cluster

    # -- firing ---------------------------------------------------------------------------
    def start(self, folder: ScheduleDirectory) -> dict[str, Any]:
        """Start what the schedule describes, now; the record of what started."""
        definition = folder.definition()
        kind, body, base = definition["kind"], definition["spec"], Path(definition["base_dir"])
        confine, params = definition["confine"], definition["params"]
        if kind == "pipeline":
            from kubelab.pipelines.service import Pipelines

            return Pipelines(self.lab).create(body, base, confine, params, schedule=folder.id)
        if kind == "sweep":
            from kubelab.sweeps.service import Sweeps

            return Sweeps(self.lab).create(body, base, confine)
        if params:
            body = {**body, "params": {**(body.get("params") or {}), **params}}
        return self.lab.submit(body, base, confine)

    def running(self, kind: str, started_id: str) -> bool:
        """Whether something a schedule started earlier is still running."""
        try:
            if kind == "pipeline":
                from kubelab.pipelines.service import Pipelines

                return Pipelines(self.lab).pipeline(started_id).read_state().status == RUNNING
            if kind == "sweep":
                from kubelab.sweeps.service import Sweeps

                return Sweeps(self.lab).sweep(started_id).read_state().status == RUNNING
            run = self.lab.run(started_id)  # asked of the backend: a Job may have ended unseen
            return not self.lab.backend.reconcile(run, run.status()).terminal
        except (NotFound, OSError, ValueError):
            return False

    def stop(self, kind: str, started_id: str, wait: float = 30.0) -> None:
        """Stop what an earlier fire started (concurrency: replace); waits (bounded) for its end."""
        with contextlib.suppress(NotFound, Conflict):
            if kind == "pipeline":
                from kubelab.pipelines.service import Pipelines

                Pipelines(self.lab).stop(started_id)
            elif kind == "sweep":
                from kubelab.sweeps.service import Sweeps

                Sweeps(self.lab).stop(started_id)
            else:
                self.lab.stop(started_id)
        deadline = time.monotonic() + wait
        while self.running(kind, started_id) and time.monotonic() < deadline:
            time.sleep(0.05)
