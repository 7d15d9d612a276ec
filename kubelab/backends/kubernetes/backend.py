"""`KubernetesBackend`: experiments as Jobs (or Kubeflow jobs) in the user's namespace.

The run directory stays the record: `submit` creates what `builders.build` returns, and
states flow back into `status.json` from one watch per kind (`watcher.Watcher`) in a
long-lived server, or from a direct read in `reconcile` (the CLI, or after a restart). Either
way `states.observe` turns the same objects into the same state and reason.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubelab.backends.base import Backend, ClusterAccess
from kubelab.backends.kubernetes import builders, dcgm, dra, elastic_resizer, metrics_sampler, names, states
from kubelab.backends.kubernetes import events as kube_events
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.chores import Chores
from kubelab.backends.kubernetes.connection import in_cluster_client, kubeconfig_client
from kubelab.backends.kubernetes.errors import DEFAULT_RETRY, RetryPolicy, translate
from kubelab.backends.kubernetes.image_build import BuildSettings
from kubelab.backends.kubernetes.image_stage import ImageStage
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.pod_logs import Sight, archive_logs, archived_text, live_logs
from kubelab.backends.kubernetes.quota import quota_resources
from kubelab.backends.kubernetes.watcher import Watcher
from kubelab.errors import FieldError, KubelabError, ValidationError
from kubelab.home import default_home
from kubelab.logfiles import byte_range, file_text
from kubelab.records import BUILDING, FAILED, RunDirectory, Status, new_id
from kubelab.spec import ExperimentSpec

log = logging.getLogger(__name__)
SUBMIT_GRACE = 30.0  # seconds a just-submitted run's Job may take to show up in a watch
KUBEFLOW = {"pytorch": "PyTorchJob", "tensorflow": "TFJob"}
Obj = dict[str, Any]
Read = tuple[Obj | None, list[Obj], list[Obj]]  # a run's main object (Job...), pods and events


class KubernetesBackend(Backend):
    name = "kubernetes"

    def __init__(
        self,
        api_client: client.ApiClient | None,
        nb: NotebookEnv,
        runs_root: Path | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        watch_timeout: int = 300,
    ) -> None:
        self.nb = nb
        self.retry = retry
        self.watch_timeout = watch_timeout
        self._client = api_client
        self._api: KubeApi | None = None
        root = Path(runs_root) if runs_root is not None else Path(nb.home) / "runs" if nb.home else None
        self._roots: set[Path] = {root} if root else set()
        self._lock = threading.RLock()
        self._served: dict[str, bool] = {}
        self.watcher: Watcher | None = None
        self.elastic = elastic_resizer.ElasticResizer(lambda: self.api, nb, lambda: self.watcher)  # resizes
        self._chores = Chores(self._finish)
        self.sampler = metrics_sampler.MetricsSampler(dcgm.LiveSamples(), self.target)  # CPU, memory, GPUs
        self.images = ImageStage(api_client, BuildSettings.from_environ(), retry)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def from_environment(cls) -> KubernetesBackend:
        """In a pod: in-cluster config and the pod's namespace; else KUBECONFIG/~/.kube/config."""
        nb = NotebookEnv.from_environ()
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            return cls(in_cluster_client(), nb)
        return cls.from_kubeconfig(os.environ.get("KUBECONFIG") or None, nb)

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None, nb: NotebookEnv | None = None, **kwargs: Any
    ) -> KubernetesBackend:
        """Use a kubeconfig file; its context's namespace applies unless `nb` names one."""
        api_client, nb = kubeconfig_client(path, nb or NotebookEnv.from_environ())
        return cls(api_client, nb, **kwargs)

    @classmethod
    def for_render(cls) -> KubernetesBackend:
        """Only builds manifests (`kubelab render`): no cluster connection needed."""
        return cls(None, NotebookEnv.from_environ())

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            if self._client is None:
                raise KubelabError("this backend was made for rendering only")
            if not self.nb.namespace:
                raise ValidationError(
                    "no namespace",
                    [FieldError("KUBELAB_NAMESPACE", "is not set and no service account namespace exists")],
                )
            self._api = KubeApi(self._client, self.nb.namespace, self.retry)
        return self._api

    @property
    def namespace(self) -> str | None:
        return self.nb.namespace

    def cluster(self) -> ClusterAccess:  # pipelines' Workflows and schedules' CronJobs go there
        return ClusterAccess(self.api, self.nb)

    def makes_environments(self) -> bool:  # into an image, with the hub's registry (image_stage.py)
        return self.images.settings is not None

    def runs_init_steps(self) -> bool:  # as an init container on the workspace (init_container.py)
        return True

    # -- building --------------------------------------------------------------------------
    def target(
        self, run: RunDirectory, spec: ExperimentSpec, status: Status | None = None
    ) -> builders.Target:
        owner = names.owner_hash(self.nb.user, str(run.path.parent.resolve()))
        return builders.Target(
            run_id=run.id,
            run_dir=str(run.path),
            user=self.nb.user,
            name=names.job_name(spec.display_name, run.id, owner),
            namespace=self.nb.namespace,
            sweep=status.sweep if status else None,
            trial=status.trial if status else None,
            pipeline=status.pipeline if status else None,
            pipeline_step=status.pipeline_step if status else None,
        )

    def render(self, spec: ExperimentSpec, run_id: str) -> list[Obj]:
        run_id = run_id if len(run_id) == 12 and run_id.isalnum() else new_id()
        root = next(iter(self._roots), None) or default_home() / "runs"
        return builders.build(spec, self.target(RunDirectory(root / run_id), spec), self.nb)

    # -- submitting ------------------------------------------------------------------------
    def submit(self, run: RunDirectory, spec: ExperimentSpec) -> None:
        from kubelab.shims import stage

        stage(run.path)  # `import nni` and Polyaxon's client in the pod (see kubelab/shims.py)
        builders.build(spec, self.target(run, spec), self.nb)  # refuses a bad spec before any build
        spec = self.images.prepare(run, spec, self.nb.image, self.nb.user)  # the environment's image
        if spec.engine == "kubeflow":
            self._require_kubeflow(KUBEFLOW[spec.framework])
        self._roots.add(run.path.parent)
        if not self.images.waiting(run):
            return self._start(run, spec)
        self._apply(run, states.Observation(BUILDING, f"building the image {spec.image}"))

    def _start(self, run: RunDirectory, spec: ExperimentSpec) -> None:
        target = self.elastic.sized(self.target(run, spec, run.status()), spec)  # an elastic Job's size
        objects = builders.build(spec, target, self.nb)
        created: list[Obj] = []
        for obj in objects:
            action = f"create {obj['kind']} {obj['metadata']['name']}"
            try:
                created.append(self._create(dra.owned(obj, created), run.id))
            except ApiException as exc:
                self._undo(created)
                raise translate(exc, action) from exc
            except KubelabError:
                self._undo(created)
                raise
        main = next(o for o in created if o["kind"] in ("Job", "PyTorchJob", "TFJob"))
        self._apply(run, states.observe(main, [], []))

    def _create(self, obj: Obj, run_id: str) -> Obj:
        try:
            return self.api.create(obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
            # A retried create whose first attempt got through: it is ours if it says so.
            existing = self.api.get(obj["kind"], obj["metadata"]["name"])
            labels = ((existing or {}).get("metadata") or {}).get("labels") or {}
            if labels.get(names.EXPERIMENT) == run_id:
                return dict(existing or {}, kind=obj["kind"])
            raise

    def _undo(self, created: list[Obj]) -> None:
        """Delete what a failed submit made (e.g. the Service when the Job was refused)."""
        for obj in reversed(created):
            try:
                self.api.delete(obj["kind"], obj["metadata"]["name"])
            except (ApiException, KubelabError) as exc:
                log.warning("could not clean up %s %s: %s", obj["kind"], obj["metadata"]["name"], exc)

    def _require_kubeflow(self, kind: str) -> None:
        if kind not in self._served:
            try:
                self._served[kind] = self.api.serves("kubeflow.org", "v1", kind)
            except ApiException as exc:
                raise translate(exc, "discover the Kubeflow Training Operator") from exc
        if not self._served[kind]:
            why = f"kubeflow needs the Kubeflow Training Operator ({kind} in kubeflow.org/v1), which this "
            why += "cluster does not serve; use engine: job"
            raise ValidationError("cannot run this experiment on this cluster", [FieldError("engine", why)])

    # -- the objects of a run --------------------------------------------------------------
    def _run_objects(self, run: RunDirectory) -> Read:
        """The run's main object (Job or Kubeflow job), its pods and its events."""
        selector = names.run_selector(self.nb.user, run.id)
        if self.watcher is not None and self.watcher.is_synced:
            cache = self.watcher.cache
            mains = [o for kind in self._main_kinds() for o in cache.of_run(kind, run.id)]
            pods = cache.of_run("Pod", run.id)
            events = cache.events_of(run.id)
        else:
            mains = []
            for kind in self._main_kinds(run):
                listed = self.api.list(kind, label_selector=selector)
                mains += [dict(o, kind=kind) for o in listed.get("items") or []]
            pods = [
                dict(p, kind="Pod") for p in self.api.list("Pod", label_selector=selector).get("items") or []
            ]
            events = kube_events.fetch_events(self.api, mains + pods) if mains else []
        roles = [((o.get("metadata") or {}).get("labels") or {}).get(names.ROLE) for o in mains]
        main = next((o for o, role in zip(mains, roles, strict=True) if role != "ps"), None)
        return main, pods, events

    def _main_kinds(self, run: RunDirectory | None = None) -> list[str]:
        kinds = ["Job"]
        if run is not None:
            try:
                spec = run.spec()
            except (OSError, ValueError):
                spec = {}
            if spec.get("engine") == "kubeflow" and spec.get("framework") in KUBEFLOW:
                return [KUBEFLOW[spec["framework"]]]
            return kinds
        return kinds + [k for k in KUBEFLOW.values() if self._served.get(k)]

    # -- states ----------------------------------------------------------------------------
    def _apply(self, run: RunDirectory, obs: states.Observation) -> Status:
        """Write `obs` into status.json if it says something new; terminal states are final."""
        with self._lock:
            status = run.status()
            if status.terminal or obs.provisional:
                return status
            state, reason, code = obs.state, obs.reason, obs.exit_code
            if state == FAILED and run.stop_file.exists():
                state, reason = run.stop_outcome()
            changed = (state, reason, code) != (status.state, status.reason, status.exit_code)
            changed |= (obs.replicas, obs.attempt) != (status.replicas, status.attempt)
            if not changed:
                return status
            if (state, reason) != (status.state, status.reason):
                status.move(state, reason, code, obs.size)
            status.exit_code = code if code is not None else status.exit_code
            status.replicas, status.attempt = obs.replicas, obs.attempt
            run.write_status(status)
        if status.terminal:
            self._chores.add(run)
        return status

    def _missing(self, run: RunDirectory, status: Status) -> Status:
        """The run's Job is gone: stopped by us, or deleted behind kubelab's back."""
        with self._lock:
            status = run.status()
            if status.terminal:
                return status
            if run.stop_file.exists():
                status.move(*run.stop_outcome())
            elif time.time() - run.spec_file.stat().st_mtime < SUBMIT_GRACE:
                return status
            else:
                why = "deleted outside kubelab, or removed after it finished while nobody watched"
                status.move(FAILED, f"its Kubernetes Job no longer exists ({why})")
            run.write_status(status)
            return status

    def reconcile(self, run: RunDirectory, status: Status, read: Read | None = None) -> Status:
        """`read`: the run's objects, when the caller has just read them (`_run_objects`)."""
        if status.terminal or status.backend != self.name:
            return status
        self._roots.add(run.path.parent)
        if self.images.waiting(run):
            return self.images.advance(run, status, lambda built: self._start(run, built))
        try:
            main, pods, events = read or self._run_objects(run)
        except (ApiException, KubelabError) as exc:
            log.warning("cannot reconcile %s: %s", run.id, exc)
            return status  # keep the last known state; the API may be back soon
        if main is None:
            return self._missing(run, status)
        return self._apply(run, states.observe(main, pods, events))

    # -- watching --------------------------------------------------------------------------
    def start(self) -> None:
        """One watch per kind: Jobs, Pods, Events, and Kubeflow jobs when served."""
        if self.watcher is not None or self._client is None:
            return
        kinds = ["Job", "Pod", "Event"]
        for kind in KUBEFLOW.values():
            with contextlib.suppress(KubelabError):  # not served: not watched
                self._require_kubeflow(kind)
                kinds.append(kind)
        self.watcher = Watcher(
            self.api,
            names.user_selector(self.nb.user),
            kinds,
            self._on_change,
            self._on_event,
            self.watch_timeout,
        )
        self.watcher.start()
        self.sampler.start(self.api, self.nb.user, lambda: self.watcher, self._find_run)
        self._chores.ensure()
        self.elastic.start()

    def close(self) -> None:
        self.sampler.close()
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        self.elastic.close()
        self._chores.close()

    def _find_run(self, run_id: str) -> RunDirectory | None:
        for root in list(self._roots):
            run = RunDirectory(root / run_id)
            if run.exists():
                return run
        return None

    def _on_change(self, run_id: str, kind: str) -> None:
        run = self._find_run(run_id)
        self.elastic.poke()
        if run is None or self.watcher is None:
            return
        try:
            with self._lock:  # read and write as one: a watch thread's older view must not land last
                status = run.status()
                if status.terminal or status.backend != self.name:
                    return
                main, pods, events = self._run_objects(run)
                if main is None and kind.endswith("/deleted") and self.watcher.is_synced:
                    self._missing(run, status)
                elif main is not None:
                    self._apply(run, states.observe(main, pods, events))
        except (OSError, ValueError) as exc:
            log.warning("cannot update %s: %s", run_id, exc)

    def _on_event(self, run_id: str, event: Obj) -> None:
        run = self._find_run(run_id)
        if run is not None:
            kube_events.append_event(run.path, event)

    # -- after a run ends (on the chores thread): keep the logs and GPU samples, remove helpers
    def _finish(self, run: RunDirectory) -> None:
        """Keep the logs and DCGM samples in the run directory; delete what outlives its use."""
        if self._client is None:
            return
        archive_logs(self.api, self.nb.user, run)
        spec = ExperimentSpec.parse(run.spec())
        target = self.target(run, spec)
        self.sampler.live.finish(run, self.api.namespace, target.name)
        if spec.parameter_servers and spec.engine == "job":
            self.api.delete("Job", target.ps_job)
        if builders.is_distributed(spec) and spec.engine == "job":
            self.api.delete("Service", target.service)

    # -- stopping and deleting ---------------------------------------------------------------
    def stop(self, run: RunDirectory, pruned: bool = False) -> None:
        run.request_stop(pruned)
        status = run.status()
        if status.terminal:
            return
        try:
            archive_logs(self.api, self.nb.user, run)
        except (ApiException, KubelabError) as exc:
            log.warning("could not keep the logs of %s: %s", run.id, exc)
        self._delete_objects(run)
        with self._lock:
            status = run.status()
            if not status.terminal:
                status.move(*run.stop_outcome())
                run.write_status(status)

    def delete(self, run: RunDirectory) -> None:
        if run.status().backend == self.name:
            self._delete_objects(run)

    def _delete_objects(self, run: RunDirectory) -> None:
        spec = ExperimentSpec.parse(run.spec())
        target = self.target(run, spec)
        if spec.engine == "kubeflow" and spec.framework in KUBEFLOW:
            kinds = [(KUBEFLOW[spec.framework], target.name)]
        else:
            kinds = [("Job", target.name), ("Job", target.ps_job), ("Service", target.service)]
        for kind, name in kinds:
            try:
                self.api.delete(kind, name, propagation="Background")
            except ApiException as exc:
                raise translate(exc, f"delete {kind} {name}") from exc

    # -- logs and events ---------------------------------------------------------------------
    def logs(
        self,
        run: RunDirectory,
        replica: int = 0,
        follow: bool = False,
        start: int = 0,
        idle: bool = False,
        timestamps: bool = False,
    ) -> Iterator[str]:
        """The replica's newest pod's log (with `follow`, across retries until the run ends);
        the archived copy in the run directory once the pods are gone."""
        archived = run.log_file(replica)
        if run.status().terminal and archived.exists():
            # Ended and archived: the copy is complete (the watch may still show a deleted pod).
            if timestamps:
                yield from byte_range(archived_text(archived, True), start)
            else:
                yield from file_text(archived, start)  # seeks, reads no more than asked
            return
        live = live_logs(self.api, run, replica, follow, self._look, timestamps)
        yield from byte_range(live, start)

    def _look(self, run: RunDirectory, replica: int) -> Sight:
        """The replica's newest pod and whether the run is over, from one read of its objects,
        whose state is settled first: a reader in a process that watches nothing (`run --wait`,
        `logs -f`) is the only one there to see the run end."""
        main, pods, events = self._run_objects(run)
        status = self.reconcile(run, run.status(), (main, pods, events))
        views = [v for v in states.latest_per_replica(pods) if v.role == "worker" and v.index == replica]
        return Sight(next(iter(views), None), status.terminal)

    def events(self, run: RunDirectory) -> list[dict[str, Any]]:
        """Kubernetes events about the run's Job and pods, oldest first."""
        if self.watcher is not None and (run.path / kube_events.EVENTS_FILE).exists():
            return kube_events.read_events(run.path)
        return kube_events.dedupe([kube_events.event_record(e) for e in self._run_objects(run)[2]])

    def refresh_system(self, run: RunDirectory) -> None:
        if run.status().backend == self.name and self._client is not None:  # metrics_sampler.py
            self.sampler.refresh(run, self.api, self.nb.user)

    def resources(self) -> dict[str, Any]:
        """GPUs by the namespace's ResourceQuota (nodes are cluster-scoped, out of reach)."""
        return {"backend": self.name, **quota_resources(self.api, self.nb)}
