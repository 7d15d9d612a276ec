"""How busy each GPU notebook's GPUs are: the GPU culler's eyes.

Two sources answer the same question, `utilisation(servers) -> {(user, server): percent}`:

- `NvmlUsage` on the local hub: the machine ledger says which GPUs each notebook holds and
  which process holds them (the server itself, `gpu_exec`); NVML's per-process accounting
  says how much of each GPU the server's process tree (its kernels, its terminals' commands)
  used since the last round. Every server's account may write the ledger, so an entry counts
  only when its process is one the hub started (the culler's parent) for that very server
  (`hub_started`): a name alone would let Mallory point Carol's notebook at an idle process.
  A GPU whose board keeps no per-process samples is read whole, but only when the notebook
  holds it alone.
- `PrometheusUsage` on a cluster: NVIDIA's DCGM exporter's `DCGM_FI_DEV_GPU_UTIL` by pod,
  averaged over the round, for the notebook pods the hub made (found by the Kubernetes API,
  owned by their user namespace, never by a label a user could copy).

A server no source can speak for is absent from the answer: it is never treated as idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import psutil

from .availability import USER_LABEL, USER_NAMESPACES, namespace_owners, pod_owner
from .gpu_idleness import ServerKey

NOTEBOOK_PREFIX = "notebook/"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
K = TypeVar("K")


class GpuUsage(Protocol):
    name: str

    def utilisation(self, servers: Iterable[ServerKey]) -> dict[ServerKey, float]: ...


def notebook_of(run: str) -> tuple[ServerKey, str] | None:
    """((user, server), group) of a ledger name `notebook/<user>/<group>/<server>`."""
    if not run.startswith(NOTEBOOK_PREFIX):
        return None
    parts = run[len(NOTEBOOK_PREFIX) :].split("/")
    if len(parts) != 3:
        return None
    user, group, server = parts
    return (user, "" if server == "default" else server), group


def hub_started(hub_pid: int | None = None) -> Callable[[int, ServerKey], bool]:
    """Whether `pid` is the server the hub (`hub_pid`, by default this service's parent) started
    for `key`: a child of the hub whose environment, set by the hub at its start, names that
    user and server. A process of a user's own is a grandchild of the hub at best."""

    def vouch(pid: int, key: ServerKey) -> bool:
        try:
            process = psutil.Process(pid)
            if process.ppid() != (os.getppid() if hub_pid is None else hub_pid):
                return False
            environ = process.environ()
        except psutil.Error:
            return False
        user, server = key
        return environ.get("JUPYTERHUB_USER") == user and environ.get("JUPYTERHUB_SERVER_NAME", "") == server

    return vouch


def process_tree(pid: int) -> set[int]:
    """A server's pid and its descendants: its kernels and what its terminals started."""
    try:
        root = psutil.Process(pid)
        return {pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.Error:
        return set()


class NvmlUsage:
    """Per-process GPU utilisation from NVML, summed over each notebook's process tree."""

    name = "nvml"

    def __init__(
        self,
        nvml: Any,
        holdings: Callable[[], dict[str, tuple[int, list[int]]]],
        tree: Callable[[int], set[int]] = process_tree,
        vouch: Callable[[int, ServerKey], bool] | None = None,
    ) -> None:
        self.nvml = nvml
        self.holdings = holdings
        self.tree = tree
        self.vouch = vouch or hub_started()
        self.last_seen: dict[int, int] = {}  # GPU index -> NVML timestamp (µs) of the last sample
        nvml.nvmlInit()

    def utilisation(self, servers: Iterable[ServerKey]) -> dict[ServerKey, float]:
        wanted = set(servers)
        held: dict[ServerKey, tuple[int, list[int]]] = {}
        holdings = self.holdings()
        for run, (pid, gpus) in holdings.items():
            found = notebook_of(run)
            if found and found[0] in wanted and self.vouch(pid, found[0]):
                held[found[0]] = (pid, gpus)
        # busy if any of its GPUs is busy
        return {key: max(values) for key, values in self.readings(held, holdings).items()}

    def readings(
        self, held: Mapping[K, tuple[int, list[int]]], holdings: Mapping[str, tuple[int, list[int]]]
    ) -> dict[K, list[float]]:
        """Each holder's utilisation of each GPU it holds (its pid's process tree's samples since
        the last round), for the holders whose every GPU could be read; `holdings` is the whole
        ledger, to tell a GPU held alone."""
        sharers: dict[int, int] = {}
        for _, gpus in holdings.values():
            for index in gpus:
                sharers[index] = sharers.get(index, 0) + 1
        per_gpu: dict[int, dict[int, float] | None] = {}
        answer: dict[K, list[float]] = {}
        for key, (pid, gpus) in held.items():
            pids = self.tree(pid)
            found: list[float] = []
            for index in gpus:
                if index not in per_gpu:
                    per_gpu[index] = self._per_process(index)
                processes = per_gpu[index]
                if processes is not None:
                    found.append(sum(util for p, util in processes.items() if p in pids))
                elif sharers.get(index, 0) == 1:  # no per-process samples: whole GPU, held alone
                    found.append(self._whole(index))
            if found and len(found) == len(gpus):
                answer[key] = found
        return answer

    def _per_process(self, index: int) -> dict[int, float] | None:
        """pid -> mean SM utilisation since the last round; None where the board keeps none."""
        nvml = self.nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, self.last_seen.get(index, 0))
        except nvml.NVMLError_NotFound:  # no process ran a kernel since then
            return {}
        except nvml.NVMLError:
            return None
        sums: dict[int, list[float]] = {}
        for sample in samples:
            sums.setdefault(int(sample.pid), []).append(float(sample.smUtil))
            self.last_seen[index] = max(self.last_seen.get(index, 0), int(sample.timeStamp))
        return {pid: sum(values) / len(values) for pid, values in sums.items()}

    def _whole(self, index: int) -> float:
        handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        return float(self.nvml.nvmlDeviceGetUtilizationRates(handle).gpu)

    def close(self) -> None:
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()


def notebook_pods(
    pods: Iterable[dict[str, Any]], namespaces: Iterable[dict[str, Any]]
) -> dict[tuple[str, str], ServerKey]:
    """(namespace, pod) -> (user, server) for the hub's notebook pods. A pod's hub annotation
    names its user only where that user owns the pod's namespace (or, in a shared namespace,
    where the pod's kubelab user label, which only the hub sets there, says so too): a user's
    own pod claiming to be someone else's notebook is not read as theirs."""
    from kubespawner.slugs import safe_slug  # how KubeSpawner (and so the hub) names users

    owners = namespace_owners(namespaces)
    found: dict[tuple[str, str], ServerKey] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        user = annotations.get("hub.jupyter.org/username")
        if not user or (meta.get("labels") or {}).get("component") != "singleuser-server":
            continue
        owner, _ = pod_owner(pod, owners)
        if owner != safe_slug(user) or owner != (meta.get("labels") or {}).get(USER_LABEL):
            continue
        found[(meta.get("namespace", ""), meta.get("name", ""))] = (
            user,
            annotations.get("hub.jupyter.org/servername", ""),
        )
    return found


def prometheus_query(url: str, query: str, timeout: float) -> list[dict[str, Any]]:
    """The `data.result` of an instant query to the Prometheus HTTP API at `url`."""
    address = f"{url.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(address, timeout=timeout) as response:
        reply = json.loads(response.read())
    if reply.get("status") != "success":
        raise RuntimeError(f"Prometheus answered {reply.get('errorType')}: {reply.get('error')}")
    return list(reply["data"]["result"])


class PrometheusUsage:
    """DCGM's utilisation by pod through a Prometheus HTTP API (`/api/v1/query`)."""

    name = "dcgm"

    def __init__(
        self,
        url: str,
        window: float,
        pods: Callable[[], dict[tuple[str, str], ServerKey]],
        timeout: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.window = max(60, int(window))
        self.pods = pods
        self.timeout = timeout

    def query(self) -> str:
        by = "namespace, pod, exported_namespace, exported_pod"
        return f"max by ({by}) (avg_over_time({DCGM_UTIL}[{self.window}s]))"

    def utilisation(self, servers: Iterable[ServerKey]) -> dict[ServerKey, float]:
        wanted = set(servers)
        where = self.pods()
        answer: dict[ServerKey, float] = {}
        for series in prometheus_query(self.url, self.query(), self.timeout):
            labels = series.get("metric") or {}
            # scraped without honorLabels, the exporter's pod labels come back as exported_*
            namespace = labels.get("exported_namespace") or labels.get("namespace", "")
            pod = labels.get("exported_pod") or labels.get("pod", "")
            key = where.get((namespace, pod))
            if key in wanted and key is not None:
                answer[key] = max(answer.get(key, 0.0), float(series["value"][1]))
        return answer


def hub_notebook_pods(kubeconfig: str | None = None) -> Callable[[], dict[tuple[str, str], ServerKey]]:
    """`notebook_pods` read each round with the hub's own credentials (in the cluster, its
    ServiceAccount; elsewhere the kubeconfig)."""
    from kubernetes import client, config

    if kubeconfig:
        api_client = config.new_client_from_config(config_file=kubeconfig)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        api_client = client.ApiClient()
    core = client.CoreV1Api(api_client)

    def read() -> dict[tuple[str, str], ServerKey]:
        selector = "component=singleuser-server"
        pods: Any = core.list_pod_for_all_namespaces(label_selector=selector, _preload_content=False)
        namespaces: Any = core.list_namespace(label_selector=USER_NAMESPACES, _preload_content=False)
        return notebook_pods(json.loads(pods.data)["items"], json.loads(namespaces.data)["items"])

    return read
