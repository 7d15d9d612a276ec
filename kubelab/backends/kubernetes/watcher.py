"""One watch per kind for the user's kubelab objects, feeding states into run directories.

Like a client-go informer: list, then watch from the list's resourceVersion; when a watch
ends, resume from the last version seen; when the server answers 410 Gone (the version was
compacted away), list again. The caches it keeps (Jobs, Pods, Events, Kubeflow jobs) are
the only inputs of `states.observe`, so a change costs one recomputation for one run and no
API request. Connections: exactly one watch per kind, however many experiments are live.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.api import KubeApi

log = logging.getLogger(__name__)
Obj = dict[str, Any]
EVENTS_PER_RUN = 50
ORPHAN_NAMES = 2000


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Cache:
    """Objects of the watched kinds, indexed by the run they belong to."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[str, dict[str, Obj]] = {}  # kind -> name -> object
        self.by_run: dict[str, dict[str, set[str]]] = {}  # kind -> run id -> names
        self.owner: dict[str, str] = {}  # object name -> run id (for events)
        self.events: dict[str, deque[Obj]] = {}  # run id -> recent events
        self.orphans: dict[str, list[Obj]] = {}  # events that arrived before their object

    def put(self, kind: str, obj: Obj) -> str | None:
        name = obj["metadata"]["name"]
        run = (obj["metadata"].get("labels") or {}).get(names.EXPERIMENT)
        with self.lock:
            self.objects.setdefault(kind, {})[name] = obj
            if run:
                self.by_run.setdefault(kind, {}).setdefault(run, set()).add(name)
                self.owner[name] = run
        return run

    def remove(self, kind: str, obj: Obj) -> str | None:
        name = obj["metadata"]["name"]
        with self.lock:
            old = self.objects.get(kind, {}).pop(name, None) or obj
            run = (old["metadata"].get("labels") or {}).get(names.EXPERIMENT)
            if run:
                self.by_run.get(kind, {}).get(run, set()).discard(name)
        return run

    def replace(self, kind: str, items: list[Obj]) -> set[str]:
        """A fresh list: returns every run whose objects of `kind` may have changed."""
        with self.lock:
            before = set(self.by_run.get(kind, {}))
            self.objects[kind] = {}
            self.by_run[kind] = {}
            runs = {r for r in (self.put(kind, obj) for obj in items) if r}
        return before | runs

    def of_run(self, kind: str, run: str) -> list[Obj]:
        with self.lock:
            objects = self.objects.get(kind, {})
            return [objects[n] for n in self.by_run.get(kind, {}).get(run, ()) if n in objects]

    def runs(self, kind: str) -> list[str]:
        """The runs that have objects of `kind` now."""
        with self.lock:
            return [run for run, held in self.by_run.get(kind, {}).items() if held]

    def add_event(self, event: Obj) -> str | None:
        name = (event.get("involvedObject") or {}).get("name", "")
        with self.lock:
            run = self.owner.get(name)
            if run:
                self.events.setdefault(run, deque(maxlen=EVENTS_PER_RUN)).append(event)
            else:
                self.orphans.setdefault(name, []).append(event)
                while len(self.orphans) > ORPHAN_NAMES:
                    del self.orphans[next(iter(self.orphans))]
        return run

    def adopt(self, name: str) -> list[Obj]:
        """Events that named `name` before it was cached (the watches race each other)."""
        with self.lock:
            return self.orphans.pop(name, [])

    def events_of(self, run: str) -> list[Obj]:
        with self.lock:
            return list(self.events.get(run, ()))


class Watcher:
    """Runs the watches in daemon threads; `on_change(run_id, kind)` is called per change."""

    def __init__(
        self,
        api: KubeApi,
        selector: str,
        kinds: list[str],
        on_change: Callable[[str, str], None],
        on_event: Callable[[str, Obj], None],
        timeout: int = 300,
    ) -> None:
        self.api = api
        self.selector = selector
        self.kinds = kinds
        self.on_change = on_change
        self.on_event = on_event
        self.timeout = timeout
        self.cache = Cache()
        self.synced = {kind: threading.Event() for kind in kinds}
        self.open_watches = 0
        self.relists = 0
        self._counter_lock = threading.Lock()
        self._stop = threading.Event()
        self._responses: dict[str, Any] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for kind in self.kinds:
            thread = threading.Thread(
                target=self._run, args=(kind,), daemon=True, name=f"kubelab-watch-{kind}"
            )
            self._threads.append(thread)
            thread.start()

    def wait_synced(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        return all(e.wait(max(0.0, deadline - time.monotonic())) for e in self.synced.values())

    @property
    def is_synced(self) -> bool:
        return all(e.is_set() for e in self.synced.values())

    def stop(self) -> None:
        self._stop.set()
        for response in list(self._responses.values()):
            with contextlib.suppress(Exception):  # another thread may be reading it
                response.shutdown()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- the loop ------------------------------------------------------------------------
    def _run(self, kind: str) -> None:
        version: str | None = None
        failures = 0
        while not self._stop.is_set():
            try:
                if version is None:
                    version = self._relist(kind)
                version = self._stream(kind, version)
                failures = 0
            except Gone:
                version = None
            except Exception as exc:
                if self._stop.is_set():
                    return
                failures += 1
                log.warning("watching %s failed (%s); retrying", kind, exc)
                self._stop.wait(min(5.0, 0.1 * 2 ** min(failures, 6)))

    def _selector(self, kind: str) -> str | None:
        return None if kind == "Event" else self.selector

    def _relist(self, kind: str) -> str:
        listed = self.api.list(kind, label_selector=self._selector(kind))
        items = listed.get("items") or []
        if kind == "Event":
            for event in items:
                self._event(event)
        else:
            runs = self.cache.replace(kind, items)
            for obj in items:  # events the Event list met before this one (the lists race)
                for event in self.cache.adopt(obj["metadata"]["name"]):
                    self._event(event)
            for run in runs:
                self._changed(run, kind)
        self.relists += 1
        self.synced[kind].set()
        version: str = listed["metadata"]["resourceVersion"]
        return version

    def _stream(self, kind: str, version: str) -> str:
        try:
            response = self.api.watch(kind, version, self.timeout, self._selector(kind))
        except ApiException as exc:
            if exc.status == 410:
                raise Gone from exc
            raise
        self._responses[kind] = response
        with self._counter_lock:
            self.open_watches += 1
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if self._stop.is_set():
                    break
                if not line:
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                kind_of_event = event.get("type")
                if kind_of_event == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone(obj.get("message"))
                    raise RuntimeError(obj.get("message") or "watch error")
                version = (obj.get("metadata") or {}).get("resourceVersion") or version
                if kind_of_event == "BOOKMARK":
                    continue
                self._apply(kind, kind_of_event, obj)
        finally:
            with self._counter_lock:
                self.open_watches -= 1
            self._responses.pop(kind, None)
            response.release_conn()
        return version

    def _apply(self, kind: str, change: str, obj: Obj) -> None:
        if kind == "Event":
            self._event(obj)
            return
        run = self.cache.remove(kind, obj) if change == "DELETED" else self.cache.put(kind, obj)
        if run and change == "ADDED":
            for event in self.cache.adopt(obj["metadata"]["name"]):
                self._event(event)
        if run:
            self._changed(run, kind if change != "DELETED" else f"{kind}/deleted")

    def _event(self, event: Obj) -> None:
        run = self.cache.add_event(event)
        if run:
            try:
                self.on_event(run, event)
            except Exception as exc:
                log.warning("cannot record an event of %s: %s", run, exc)
            self._changed(run, "Event")

    def _changed(self, run: str, kind: str) -> None:
        """`on_change`, whose failure is the run's, never the watch's: a run that cannot be
        updated now (its reader met a 503 while another kind is still listing) is updated at its
        next change, or when that list comes; a watch that gave up on it would never sync."""
        try:
            self.on_change(run, kind)
        except Exception as exc:
            log.warning("cannot update %s after a %s change: %s", run, kind, exc)
