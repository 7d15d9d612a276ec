"""Resizes this user's elastic Indexed Jobs as `elastic_sizing.plan` decides (the thin adapter).

It reads what the notebook's token may read (the user's Jobs and pods, the namespace's
ResourceQuota) and, where the credentials allow it, the nodes and every pod on them (free GPUs
per node); it patches a Job's `parallelism` and `completions` together (Kubernetes ≥ 1.27
allows both for an Indexed Job) with the reason in the `kubelab.io/resized` annotation, which
`states.observe_job` turns into the run's status and timeline. The Job controller makes the new
indexes' pods, or deletes the highest ones (their torchrun agents get SIGTERM and the pod's grace
period, then the survivors form the smaller group). It runs in a thread of a long-lived backend
(one that watches), woken by every change the watch sees and every few seconds; the quota and
the API server still bound what a patch can start, whoever sends it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes import elastic_sizing as sizing
from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.builders import Target, pod_gpus
from kubelab.backends.kubernetes.errors import translate
from kubelab.backends.kubernetes.gpu_request import GpuRequest
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.watcher import Watcher
from kubelab.errors import KubelabError
from kubelab.spec import ExperimentSpec

log = logging.getLogger(__name__)
Obj = dict[str, Any]
EVERY = 5.0  # seconds between looks when the watch reports nothing


def user_objects(api: KubeApi, selector: str, watcher: Watcher | None) -> tuple[list[Obj], list[Obj]]:
    """The user's Jobs and pods: the watch's cache once it is synced, else a list of each."""
    if watcher is not None and watcher.is_synced:
        with watcher.cache.lock:
            found = {kind: list(watcher.cache.objects.get(kind, {}).values()) for kind in ("Job", "Pod")}
        return found["Job"], found["Pod"]
    jobs = api.list("Job", label_selector=selector).get("items") or []
    return jobs, api.list("Pod", label_selector=selector).get("items") or []


def size_patch(size: int, reason: str) -> Obj:
    """The merge patch that resizes an elastic Indexed Job and says why."""
    return {
        "metadata": {"annotations": {names.RESIZED_ANNOTATION: reason}},
        "spec": {"parallelism": size, "completions": size},
    }


class ElasticResizer:
    """Plans and patches for one backend: `api()` is its API (made on first use), `watcher()` its
    watch, whose cache it reads once synced."""

    def __init__(
        self, api: Callable[[], KubeApi], nb: NotebookEnv, watcher: Callable[[], Watcher | None]
    ) -> None:
        self._api, self.nb, self.watcher = api, nb, watcher
        self.nodes_readable = True  # until the API server says otherwise (a notebook's token)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop --------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name="kubelab-elastic")
        self._thread.start()

    def poke(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(EVERY)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.step()
            except (ApiException, KubelabError, OSError, ValueError) as exc:
                log.warning("could not resize elastic runs: %s", exc)

    @property
    def api(self) -> KubeApi:
        return self._api()

    def objects(self) -> tuple[list[Obj], list[Obj]]:
        return user_objects(self.api, names.user_selector(self.nb.user), self.watcher())

    # -- one look --------------------------------------------------------------------------
    def step(self) -> list[sizing.Resize]:
        """Read, plan, patch: the resizes made. Only from a synced watch's cache: nothing is
        listed behind the watch's back, and the quota only while an elastic run is live."""
        watcher = self.watcher()
        if watcher is None or not watcher.is_synced:
            return []
        jobs, pods = self.objects()
        resource = self.nb.gpu_resource
        runs = [r for r in (sizing.elastic_run(j, pods, resource) for j in jobs) if r is not None]
        if not runs:
            return []
        waiters = [w for w in (sizing.waiter(j, pods, resource) for j in jobs) if w is not None]
        resizes = sizing.plan(runs, waiters, self.room(pods))
        for resize in resizes:
            log.info("elastic run %s: %s", resize.name, resize.reason)
            try:
                self.api.merge("Job", resize.name, size_patch(resize.size, resize.reason))
            except ApiException as exc:
                raise translate(exc, f"resize Job {resize.name}") from exc
        return resizes

    def room(self, pods: list[Obj]) -> sizing.Room:
        """Free GPUs by the namespace's quota (`pods`: the user's) and, where readable, per node."""
        resource = self.nb.gpu_resource
        quotas = self.api.list("ResourceQuota").get("items") or []
        return sizing.Room(sizing.quota_room(quotas, resource, pods), self._node_room(resource))

    def _node_room(self, resource: str) -> dict[str, int] | None:
        if not self.nodes_readable:
            return None
        core, raw = self.api.core, {"_preload_content": False}
        try:
            nodes = json.loads(self.api.call(core.list_node, **raw).data)["items"]
            busy = "status.phase!=Succeeded,status.phase!=Failed"
            listed = self.api.call(core.list_pod_for_all_namespaces, field_selector=busy, **raw)
            pods = json.loads(listed.data)["items"]
        except ApiException as exc:
            if exc.status not in (401, 403):
                raise
            log.info("nodes are out of this account's reach: elastic runs are sized by the quota")
            self.nodes_readable = False
            return None
        return sizing.node_room(nodes, pods, resource, self.nb.node_selector)

    def sized(self, target: Target, spec: ExperimentSpec) -> Target:
        """`target` with an elastic Indexed Job's first size."""
        if spec.elastic is None or spec.engine != "job":
            return target
        try:
            return replace(target, replicas=self.start_size(spec))
        except (ApiException, KubelabError) as exc:  # an account that may not read them (a schedule's)
            log.info("cannot read the free GPUs (%s): the elastic run starts at its max", exc)
            return target

    def start_size(self, spec: ExperimentSpec) -> int | None:
        """A new elastic run's first size: what the free GPUs allow (after the resizes under
        way), between `min` and `max`; None for a run without GPUs (it starts at `max`)."""
        request = pod_gpus(spec.resources, self.nb)
        if spec.elastic is None or not isinstance(request, GpuRequest):
            return None
        jobs, pods = self.objects()
        room = self.room(pods)
        runs = [sizing.elastic_run(j, pods, self.nb.gpu_resource) for j in jobs]
        sizing.settle([r for r in runs if r is not None], room)
        per = math.ceil(float(request.amount))
        return sizing.start_size(spec.elastic.min, spec.elastic.max, per, room)
