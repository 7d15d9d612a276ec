"""Reading a run's logs from its pods: the newest pod of a replica, followed across retries,
and the copy kept in the run directory when the run ends.

The Kubernetes backend hands in how to look at a run (its watch cache, or the API): the
replica's newest pod and whether the run is over, from the same objects. So this module holds
only the reading rules: what a Pending pod, a vanished pod (404) or an ended run means for a
reader. It never decides that a run is over from `status.json`: in a process that watches
nothing (the CLI, a kernel without a server) nobody else brings that file up to date.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import NamedTuple

from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes import builders, names, states
from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.errors import translate
from kubelab.backends.kubernetes.states import PodView
from kubelab.errors import KubelabError
from kubelab.log_times import Times, split_stamped, stamped, write_index
from kubelab.logfiles import file_text
from kubelab.provenance import record_image
from kubelab.records import RunDirectory


class Sight(NamedTuple):
    """One look at a run: its replica's newest pod, and whether the run is over."""

    pod: PodView | None
    over: bool


Look = Callable[[RunDirectory, int], Sight]


def container(run: RunDirectory) -> str:
    spec = run.spec()
    if spec.get("engine") == "kubeflow":
        return builders.KUBEFLOW_CONTAINER.get(spec.get("framework") or "", builders.CONTAINER)
    return builders.CONTAINER


def live_logs(
    api: KubeApi, run: RunDirectory, replica: int, follow: bool, look: Look, timestamps: bool = False
) -> Iterator[str]:
    """The replica's pods' logs in turn (a retry is a new pod), from the API while the pods
    exist, else from the copy archived in the run directory. With `timestamps`, lines carry
    the API's own times (`timestamps=true`).

    A followed stream may close while its container still runs (the kubelet restarted, the API
    server's timeout, a log the node serves only a moment after the container started): it is
    opened again, from where it stopped, until the container is done; then read once more, so
    lines written just before the end are not lost to a stream that closed early."""
    read: dict[str, int] = {}  # characters of each pod's log already yielded
    done: set[str] = set()  # pods whose log was read to its end
    while True:
        pod, over = look(run, replica)
        if pod is not None and pod.name not in done:
            if pod.phase == "Pending":
                if not follow or over:
                    return
                time.sleep(0.2)
                continue
            ended = partial(_log_ended, run, replica, pod.name, look)
            finished = not follow or ended()
            try:
                for chunk in _after(
                    api.pod_log(
                        pod.name, container(run), follow=not finished, ended=ended, timestamps=timestamps
                    ),
                    read.setdefault(pod.name, 0),
                ):
                    read[pod.name] += len(chunk)
                    yield chunk
            except ApiException as exc:
                if exc.status not in (400, 404):
                    raise translate(exc, f"read the log of pod {pod.name}") from exc
                if exc.status == 404:
                    if run.log_file(replica).exists():
                        yield from archived_text(run.log_file(replica), timestamps)  # the pod is gone
                        return
                    finished = True
            if not follow:
                return
            if finished:
                done.add(pod.name)
            else:  # the stream closed early: look again, then read on (or to the end)
                time.sleep(0.2)
            continue
        elif pod is None and not read:
            path = run.log_file(replica)
            if path.exists():
                yield from archived_text(path, timestamps)
                return
            if not follow or over:
                return
        if over:
            return
        time.sleep(0.2)


def _after(chunks: Iterator[str], skip: int) -> Iterator[str]:
    """The text of `chunks` after its first `skip` characters: a log stream opened again from
    its start, less what was already shown."""
    for chunk in chunks:
        if skip >= len(chunk):
            skip -= len(chunk)
            continue
        yield chunk[skip:]
        skip = 0


def _log_ended(run: RunDirectory, replica: int, pod_name: str, look: Look) -> bool:
    """Whether a followed pod's log can have no more lines (its container is done)."""
    pod, over = look(run, replica)
    return over or pod is None or pod.name != pod_name or pod.phase in ("Succeeded", "Failed")


def archive_logs(api: KubeApi, user: str, run: RunDirectory) -> None:
    """Copy each replica's newest started pod's log into the run directory, before the pods go."""
    # Ask the API, not the watch cache: a pod that just started may not be in the cache yet,
    # and its log is about to go with it.
    selector = names.run_selector(user, run.id)
    pods = [dict(p, kind="Pod") for p in api.list("Pod", label_selector=selector).get("items") or []]
    for pod in pods:  # environment.json: the image digest the kubelet pulled (written once)
        record_image(run, pod.get("status") or {})
    for view in states.latest_per_replica(pods):
        if view.role != "worker" or view.phase == "Pending":
            continue
        try:
            text, times = split_stamped("".join(api.pod_log(view.name, container(run), timestamps=True)))
        except (ApiException, KubelabError):
            continue
        run.logs_dir.mkdir(exist_ok=True)
        run.log_file(view.index).write_text(text)
        write_index(run.log_file(view.index), times)  # the times, for `timestamps` readers


def archived_text(path: Path, timestamps: bool) -> Iterator[str]:
    """An archived log, its lines prefixed with the times archived beside it when asked."""
    if not timestamps:
        return file_text(path)
    return stamped(file_text(path), Times(path).at)
