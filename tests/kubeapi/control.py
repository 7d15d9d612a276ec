"""Test controls: play the parts of the scheduler, the kubelet and the cluster operator.

Nothing here is reachable by API clients except through `POST /_control/<method>` with the
admin token (for servers run as a subprocess). Each call changes objects exactly as the real
component would: same fields, conditions, reasons and Events, so clients watching the API see
a believable pod lifecycle.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from . import defaults, logs
from .cluster import Cluster
from .quota import TERMINAL, pod_amounts

CONTROL_METHODS = (
    "add_node", "schedule_pod", "make_unschedulable", "run_pod", "succeed_pod", "fail_pod",
    "evict_pod", "fail_image_pull", "append_log", "emit_event", "fail_next", "clear_faults",
    "compact_history", "token_for", "token_for_user",
)


def _condition(type_: str, status: str, reason: str | None = None,
               message: str | None = None) -> dict[str, Any]:
    cond: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None,
                            "lastTransitionTime": defaults.now()}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _set_conditions(status: dict[str, Any], *conds: dict[str, Any]) -> None:
    existing = {c["type"]: c for c in status.get("conditions") or []}
    for cond in conds:
        existing[cond["type"]] = cond
    status["conditions"] = list(existing.values())


class ClusterControls:
    """Mixed into `KubeApiServer`; needs `self.cluster`."""

    cluster: Cluster

    # -- nodes and scheduling ------------------------------------------------------------
    def add_node(self, name: str, *, cpu: str = "8", memory: str = "32Gi", gpus: int = 0,
                 labels: dict[str, str] | None = None,
                 extended: dict[str, str] | None = None, pods: int = 110) -> dict[str, Any]:
        """A Ready node with this capacity (= allocatable); `gpus` adds `nvidia.com/gpu`."""
        capacity = {"cpu": str(cpu), "memory": str(memory), "pods": str(pods),
                    "ephemeral-storage": "100Gi", **(extended or {})}
        if gpus:
            capacity["nvidia.com/gpu"] = str(gpus)
        index = len(self.cluster.store.list("nodes")) + 10
        body = {"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", **(labels or {})}},
            "spec": {},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [_condition("Ready", "True", "KubeletReady",
                                                 "kubelet is posting ready status")],
                       "addresses": [{"type": "InternalIP", "address": f"10.0.0.{index}"},
                                     {"type": "Hostname", "address": name}],
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                    "machineID": secrets.token_hex(16),
                                    "systemUUID": secrets.token_hex(16),
                                    "bootID": secrets.token_hex(16),
                                    "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12",
                                    "kubeProxyVersion": "",
                                    "kubeletVersion": "v" + self.cluster.validator.schema.version,
                                    "containerRuntimeVersion": "containerd://1.7.0"}}}
        return self.cluster.create(self.cluster.rt("nodes"), "", body)[0]

    def _fit(self, pod: dict[str, Any]) -> tuple[str | None, str]:
        nodes = self.cluster.store.list("nodes")
        if not nodes:
            return None, "no nodes available to schedule pods"
        wanted = {k.split(".", 1)[1]: v for k, v in pod_amounts(pod).items()
                  if k.startswith("requests.") and v}
        selector = pod["spec"].get("nodeSelector") or {}
        reasons: Counter[str] = Counter()
        pods = self.cluster.store.list("pods")
        for node in nodes:
            labels = node["metadata"].get("labels") or {}
            if node["spec"].get("unschedulable"):
                reasons["node(s) were unschedulable"] += 1
                continue
            if any(labels.get(k) != v for k, v in selector.items()):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            allocatable = node["status"].get("allocatable") or {}
            used: Counter[str] = Counter()
            for other in pods:
                if other["spec"].get("nodeName") == node["metadata"]["name"] and (
                        other["status"].get("phase") not in TERMINAL):
                    for key, value in pod_amounts(other).items():
                        if key.startswith("requests."):
                            used[key.split(".", 1)[1]] += value
            short = [res for res, amount in wanted.items()
                     if used[res] + amount > parse_quantity(allocatable.get(res, 0))]
            if short:
                for res in short:
                    reasons[f"Insufficient {res}"] += 1
                continue
            return node["metadata"]["name"], ""
        detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        return None, f"0/{len(nodes)} nodes are available: {detail}."

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.cluster.get(self.cluster.rt("pods"), namespace, name)

    def _update_pod(self, namespace: str, name: str, change: Any) -> dict[str, Any]:
        return self.cluster.mutate(self.cluster.rt("pods"), namespace, name, change)

    def schedule_pod(self, namespace: str, name: str, node: str | None = None) -> str | None:
        """Bind the pod to `node` (or the first that fits); if none fits, mark it
        unschedulable with the scheduler's message and return None."""
        pod = self._pod(namespace, name)
        if pod["spec"].get("nodeName"):
            return pod["spec"]["nodeName"]
        if node is None:
            node, message = self._fit(pod)
            if node is None:
                self.make_unschedulable(namespace, name, message)
                return None
        elif self.cluster.store.get("nodes", "", node) is None:
            raise ValueError(f"node {node!r} does not exist; add it with add_node()")

        def bind(p: dict[str, Any]) -> None:
            p["spec"]["nodeName"] = node
            _set_conditions(p["status"], _condition("PodScheduled", "True"))
        pod = self._update_pod(namespace, name, bind)
        self.cluster.record_event(pod, "Scheduled", f"Successfully assigned {namespace}/{name} "
                                  f"to {node}", component="default-scheduler")
        return node

    def make_unschedulable(self, namespace: str, name: str, message: str | None = None) -> None:
        """PodScheduled=False/Unschedulable plus a FailedScheduling event."""
        message = message or self._fit(self._pod(namespace, name))[1] or (
            "0/0 nodes are available")
        pod = self._update_pod(namespace, name, lambda p: _set_conditions(
            p["status"], _condition("PodScheduled", "False", "Unschedulable", message)))
        self.cluster.record_event(pod, "FailedScheduling", message, "Warning",
                                  "default-scheduler")

    def _node_ip(self, node: str) -> str:
        obj = self.cluster.store.get("nodes", "", node) or {}
        for addr in (obj.get("status") or {}).get("addresses") or []:
            if addr["type"] == "InternalIP":
                return addr["address"]
        return "10.0.0.1"

    def _ensure_scheduled(self, namespace: str, name: str, node: str | None) -> str:
        bound = self.schedule_pod(namespace, name, node)
        if bound is None:
            raise RuntimeError(f"pod {namespace}/{name} does not fit any node")
        return bound

    # -- the kubelet's part --------------------------------------------------------------
    def run_pod(self, namespace: str, name: str, *, node: str | None = None,
                pod_ip: str | None = None, ready: bool = True) -> dict[str, Any]:
        """Schedule if needed, then Running with running containers and a pod IP."""
        bound = self._ensure_scheduled(namespace, name, node)
        ip = pod_ip or f"10.244.{secrets.randbelow(250) + 1}.{secrets.randbelow(250) + 2}"
        stamp = defaults.now()

        def run(p: dict[str, Any]) -> None:
            st = p["status"]
            st.update(phase="Running", hostIP=self._node_ip(bound),
                      hostIPs=[{"ip": self._node_ip(bound)}], podIP=ip, podIPs=[{"ip": ip}])
            st.setdefault("startTime", stamp)
            flag = "True" if ready else "False"
            _set_conditions(st, _condition("PodReadyToStartContainers", "True"),
                            _condition("Initialized", "True"), _condition("Ready", flag),
                            _condition("ContainersReady", flag))
            st["containerStatuses"] = [self._container_status(c, {"running": {
                "startedAt": stamp}}, ready) for c in p["spec"]["containers"]]
        pod = self._update_pod(namespace, name, run)
        for ctr in pod["spec"]["containers"]:
            self.cluster.record_event(pod, "Pulled", f'Container image "{ctr["image"]}" already '
                                      "present on machine", component="kubelet")
            self.cluster.record_event(pod, "Created", f"Created container: {ctr['name']}",
                                      component="kubelet")
            self.cluster.record_event(pod, "Started", f"Started container {ctr['name']}",
                                      component="kubelet")
        return pod

    @staticmethod
    def _container_status(ctr: dict[str, Any], state: dict[str, Any],
                          ready: bool = False) -> dict[str, Any]:
        return {"name": ctr["name"], "image": ctr["image"],
                "imageID": f"docker.io/library/{ctr['image']}@sha256:{'0' * 64}",
                "containerID": f"containerd://{secrets.token_hex(32)}", "ready": ready,
                "started": "running" in state, "restartCount": 0, "state": state,
                "lastState": {}}

    def _terminate(self, namespace: str, name: str, exit_codes: dict[str, int],
                   reason: str, message: str | None, phase: str,
                   extra: Any = None) -> dict[str, Any]:
        pod = self._pod(namespace, name)
        if pod["status"].get("phase") != "Running":
            self.run_pod(namespace, name)
        stamp = defaults.now()

        def finish(p: dict[str, Any]) -> None:
            st = p["status"]
            st["phase"] = phase
            statuses = []
            for ctr in p["spec"]["containers"]:
                code = exit_codes.get(ctr["name"], exit_codes.get("*", 0))
                term: dict[str, Any] = {"exitCode": code,
                                        "reason": "Completed" if code == 0 else reason,
                                        "startedAt": st.get("startTime", stamp),
                                        "finishedAt": stamp}
                if message and code:
                    term["message"] = message
                statuses.append(self._container_status(ctr, {"terminated": term}))
            st["containerStatuses"] = statuses
            why = "PodCompleted" if phase == "Succeeded" else "PodFailed"
            _set_conditions(st, _condition("Ready", "False", why),
                            _condition("ContainersReady", "False", why),
                            _condition("PodReadyToStartContainers", "False"))
            if extra:
                extra(st)
        return self._update_pod(namespace, name, finish)

    def succeed_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """All containers exit 0; phase Succeeded (runs the pod first if needed)."""
        return self._terminate(namespace, name, {"*": 0}, "Completed", None, "Succeeded")

    def fail_pod(self, namespace: str, name: str, *, exit_code: int = 1, reason: str = "Error",
                 message: str | None = None, container: str | None = None) -> dict[str, Any]:
        """Phase Failed; `container` (default: all) terminated with `exit_code` and `reason`
        (e.g. `OOMKilled` with 137)."""
        codes = {container: exit_code} if container else {"*": exit_code}
        return self._terminate(namespace, name, codes, reason, message, "Failed")

    def evict_pod(self, namespace: str, name: str, message: str | None = None) -> dict[str, Any]:
        """Node-pressure eviction: Failed/Evicted with a DisruptionTarget condition."""
        message = message or ("The node was low on resource: memory. Threshold quantity: "
                              "100Mi, available: 20Mi.")

        def evicted(st: dict[str, Any]) -> None:
            st.update(reason="Evicted", message=message)
            _set_conditions(st, _condition("DisruptionTarget", "True", "TerminationByKubelet",
                                           message))
        pod = self._terminate(namespace, name, {"*": 137}, "Error", None, "Failed", evicted)
        self.cluster.record_event(pod, "Evicted", message, "Warning", "kubelet")
        return pod

    def fail_image_pull(self, namespace: str, name: str, *, backoff: bool = False,
                        message: str | None = None) -> dict[str, Any]:
        """Containers wait with ErrImagePull (or ImagePullBackOff); the pod stays Pending."""
        self._ensure_scheduled(namespace, name, None)
        pod = self._pod(namespace, name)
        image = pod["spec"]["containers"][0]["image"]
        reason = "ImagePullBackOff" if backoff else "ErrImagePull"
        detail = message or (f'Back-off pulling image "{image}"' if backoff else
                             f'rpc error: code = NotFound desc = failed to pull and unpack image '
                             f'"{image}": not found')

        def waiting(p: dict[str, Any]) -> None:
            st = p["status"]
            st["containerStatuses"] = [self._container_status(c, {"waiting": {
                "reason": reason, "message": detail}}) for c in p["spec"]["containers"]]
            _set_conditions(st, _condition("Ready", "False", "ContainersNotReady"),
                            _condition("ContainersReady", "False", "ContainersNotReady"))
        pod = self._update_pod(namespace, name, waiting)
        self.cluster.record_event(pod, "Failed", f'Failed to pull image "{image}": {detail}',
                                  "Warning", "kubelet")
        if backoff:
            self.cluster.record_event(pod, "BackOff", detail, "Warning", "kubelet")
        return pod

    def append_log(self, namespace: str, name: str, *lines: str,
                   container: str | None = None) -> None:
        """Append lines to a container's log (default: the pod's first container)."""
        pod = self._pod(namespace, name)
        container = container or pod["spec"]["containers"][0]["name"]
        logs.append(self.cluster, namespace, name, container, list(lines))

    def emit_event(self, namespace: str, name: str, reason: str, message: str, *,
                   kind: str = "Pod", type: str = "Normal",
                   component: str = "kubelet") -> dict[str, Any]:
        """Record an Event about an existing object of `kind`."""
        matches = [t for t in self.cluster.registry.types if t.kind == kind]
        if not matches:
            raise ValueError(f"unknown kind {kind!r}")
        obj = self.cluster.get(matches[0], namespace, name)
        return self.cluster.record_event(obj, reason, message, type, component)

    # -- the operator's part -------------------------------------------------------------
    def fail_next(self, verb: str, resource: str, status: int = 500, times: int = 1,
                  message: str | None = None, namespace: str | None = None) -> None:
        """Make the next `times` requests for `verb` on `resource` (e.g. `create`, `pods`;
        `get`, `pods/log`; `*` matches any) fail with HTTP `status`."""
        self.cluster.faults.add(verb, resource, status, times, message, namespace)

    def clear_faults(self) -> None:
        self.cluster.faults.clear()

    def compact_history(self) -> None:
        """Drop the watch history, so resuming from any older resourceVersion gets 410."""
        self.cluster.store.compact()

    def token_for(self, namespace: str, serviceaccount: str) -> str:
        """A bearer token for `namespace/serviceaccount`, creating the namespace and the
        ServiceAccount if they do not exist yet."""
        with self.cluster.transaction():
            if self.cluster.store.get("namespaces", "", namespace) is None:
                self.cluster.create(self.cluster.rt("namespaces"), "",
                                    {"metadata": {"name": namespace}})
            if self.cluster.store.get("serviceaccounts", namespace, serviceaccount) is None:
                self.cluster.create(self.cluster.rt("serviceaccounts"), namespace,
                                    {"metadata": {"name": serviceaccount}})
        return self.cluster.authn.issue_for_service_account(namespace, serviceaccount)

    def token_for_user(self, name: str, groups: list[str] | tuple[str, ...] = ()) -> str:
        return self.cluster.authn.issue_for_user(name, tuple(groups))

    def objects(self, resource: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Stored objects of `resource` (e.g. `pods`, `jobs.batch`), for assertions."""
        return list(self.cluster.store.list(resource, namespace))

