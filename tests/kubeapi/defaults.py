"""Defaulting a new object the way the API server's defaulters and admission plugins do.

Clients read these fields back (e.g. KubeSpawner reads `status.phase`, kubelab reads the Job's
generated selector), so they are filled in on create exactly where a real server fills them.
"""

from __future__ import annotations

import base64
import copy
import datetime
import uuid
from typing import Any

from kubernetes.utils.quantity import parse_quantity

JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name",
              "controller-uid", "job-name")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_uid() -> str:
    return str(uuid.uuid4())


def _container(ctr: dict[str, Any]) -> None:
    ctr.setdefault("terminationMessagePath", "/dev/termination-log")
    ctr.setdefault("terminationMessagePolicy", "File")
    image = ctr.get("image") or ""
    tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
    if "imagePullPolicy" not in ctr:
        latest = not tagged or image.endswith(":latest")
        ctr["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    resources = ctr.setdefault("resources", {})
    limits = resources.get("limits") or {}
    if limits:
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)


def pod_spec(spec: dict[str, Any]) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for section in ("initContainers", "containers"):
        for ctr in spec.get(section) or []:
            if isinstance(ctr, dict):
                _container(ctr)


def _qos(spec: dict[str, Any]) -> str:
    ctrs = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in ctrs]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits or parse_quantity(limits[name]) != parse_quantity(
                    requests.get(name, limits[name])):
                return "Burstable"
    return "Guaranteed"


def pod(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    pod_spec(spec)
    if spec.get("serviceAccount") and not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    tolerations = spec.setdefault("tolerations", [])
    for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == taint for t in tolerations if isinstance(t, dict)):
            tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300})
    obj["status"] = {"phase": "Pending", "qosClass": _qos(spec)}


def job(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    uid = obj["metadata"]["uid"]
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
        if spec.get("completions") is None:
            spec["completions"] = 1
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        labels = template_meta.setdefault("labels", {})
        name = obj["metadata"]["name"]
        for key in JOB_LABELS:
            labels[key] = uid if key.endswith("controller-uid") else name
    template = spec.setdefault("template", {})
    if isinstance(template.get("spec"), dict):
        pod_spec(template["spec"])
    obj["status"] = {}


def service(obj: dict[str, Any], allocate_ip: Any) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    if spec.get("clusterIP") != "None" and spec["type"] != "ExternalName":
        spec.setdefault("clusterIP", allocate_ip())
    if spec.get("clusterIP"):
        spec["clusterIPs"] = [spec["clusterIP"]]
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    obj["status"] = {"loadBalancer": {}}


def secret(obj: dict[str, Any]) -> None:
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


def namespace(obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj["spec"] = {"finalizers": ["kubernetes"]}
    obj["status"] = {"phase": "Active"}


def pvc(obj: dict[str, Any]) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj["status"] = {"phase": "Pending"}


def apply(kind: str, obj: dict[str, Any], allocate_ip: Any) -> dict[str, Any]:
    """Return a defaulted deep copy of `obj` (metadata uid/timestamps are set by the caller)."""
    obj = copy.deepcopy(obj)
    if kind == "Pod":
        pod(obj)
    elif kind == "Job":
        job(obj)
    elif kind == "Service":
        service(obj, allocate_ip)
    elif kind == "Secret":
        secret(obj)
    elif kind == "Namespace":
        namespace(obj)
    elif kind == "PersistentVolumeClaim":
        pvc(obj)
    return obj
