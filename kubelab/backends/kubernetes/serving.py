"""Kubernetes manifests for one version of a served service, as plain dicts (pure functions).

Where the cluster serves KServe's `InferenceService`, a version is that object's predictor:
KServe makes the pods, scales them between `minReplicas` and `maxReplicas` (zero included) and
splits traffic between the previous and the latest revision (`canaryTrafficPercent`).
Elsewhere a version is a `Deployment`, a `Service` and, when it may grow, an `autoscaling/v2`
`HorizontalPodAutoscaler` on CPU and memory (and GPU utilisation from the custom metrics API
when the lab names that metric); a stable `Service` named after the service points at one
version, and an `HTTPRoute` (serving_routes) splits between versions where the cluster has the
Gateway API.

The pods pass the `restricted` Pod Security level, carry no API token, and are labelled
`app.kubernetes.io/name: kubelab-service`, the label the namespace's `kubelab-services`
NetworkPolicy admits the hub's proxy, the notebook and the lab's ingress to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubelab import templating
from kubelab.backends.kubernetes import names
from kubelab.backends.kubernetes.builders import GPU_VISIBILITY, pod_gpus, resource_amounts
from kubelab.backends.kubernetes.gpu_request import GpuRequest
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.pod_security import container_security, pod_security
from kubelab.backends.kubernetes.serving_routes import version_name
from kubelab.errors import FieldError, ValidationError
from kubelab.gpu_share import is_fraction
from kubelab.serving.spec import ServiceSpec

Manifest = dict[str, Any]
CONTAINER = "server"
DEFAULT_PORT = 8080
APP = "kubelab-service"  # the label value the kubelab-services NetworkPolicy selects
SERVICE = "kubelab.io/service"
VERSION = "kubelab.io/service-version"
LINEAGE_ANNOTATION = "kubelab.io/serves"  # which run and file a version serves
SPEC_ANNOTATION = "kubelab.io/service-spec"
KSERVE_API = "serving.kserve.io/v1beta1"
KSERVE_VISIBILITY = "networking.kserve.io/visibility"  # cluster-local: KServe publishes no ingress
UTILIZATION = 80  # percent of the request the autoscaler keeps each replica at


@dataclass(frozen=True)
class ServiceTarget:
    """Where one version goes: its namespace and owner, the argv its container runs (a model
    server's, or the spec's own command) and what it serves (`run`, `path`, for lineage)."""

    namespace: str | None
    user: str
    argv: list[str] = field(default_factory=list)
    run: str | None = None
    path: str | None = None
    gpu_metric: str | None = None  # a per-pod custom metric of GPU utilisation (percent)
    env: dict[str, str] = field(default_factory=dict)  # the model server's settings


def port(spec: ServiceSpec) -> int:
    """The port the service answers on (the first of `ports`): the one routes and probes use."""
    return spec.ports[0] if spec.ports else DEFAULT_PORT


def argv(spec: ServiceSpec) -> list[str]:
    """An internal service's container command: the spec's own, `{{ port }}` filled in."""
    return templating.command_argv(spec.command, {"port": port(spec)})


def check(spec: ServiceSpec, nb: NotebookEnv, kserve: bool) -> None:
    """What the cluster cannot run as written, named by field, before anything is created."""
    problems = []
    if not (spec.image or nb.image):
        problems.append(FieldError("image", "is required: the notebook's image is unknown (KUBELAB_IMAGE)"))
    if is_fraction(spec.resources.gpus):
        problems.append(
            FieldError("resources.gpus", "a share of a GPU is for the local backend; ask for whole GPUs")
        )
    if spec.resources.gpu_indices is not None:
        problems.append(FieldError("resources.gpu_indices", "picks GPUs of one machine, not of a cluster"))
    if spec.replicas.min == 0 and not kserve:
        problems.append(
            FieldError("replicas.min", "0 (scale to zero) needs KServe on the cluster; ask for at least 1")
        )
    problems += [
        FieldError(f"env.{n}", "is set by kubelab from resources.gpus")
        for n in GPU_VISIBILITY
        if n in spec.env
    ]
    if problems:
        raise ValidationError("cannot serve this on Kubernetes", problems)


def labels(spec: ServiceSpec, target: ServiceTarget) -> dict[str, str]:
    return {
        names.MANAGED_BY: names.MANAGER,
        "app.kubernetes.io/name": APP,
        names.USER: names.label_value(target.user),
        SERVICE: spec.name,
        VERSION: spec.version,
    }


def _meta(name: str, spec: ServiceSpec, target: ServiceTarget, version: bool = True) -> Manifest:
    found = labels(spec, target)
    if not version:
        del found[VERSION]
    meta: Manifest = {"name": name, "labels": found}
    if target.namespace:
        meta["namespace"] = target.namespace
    return meta


def service_annotations(spec: ServiceSpec, target: ServiceTarget) -> dict[str, str]:
    """The spec (so `kubelab service show` reads it back from the cluster) and the lineage."""
    serves = {"run": target.run, "file": spec.model.path if spec.model else None, "path": target.path}
    return {
        SPEC_ANNOTATION: json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":")),
        LINEAGE_ANNOTATION: json.dumps(serves, sort_keys=True, separators=(",", ":")),
    }


def container(spec: ServiceSpec, target: ServiceTarget, nb: NotebookEnv) -> Manifest:
    answer = port(spec)
    env = {
        **target.env,
        **spec.env,
        "PORT": str(answer),
        "KUBELAB_SERVICE": spec.name,
        "KUBELAB_SERVICE_VERSION": spec.version,
    }
    if not spec.resources.gpus:  # on a GPU node the runtime shows every GPU to a container asking none
        env["NVIDIA_VISIBLE_DEVICES"] = "none"
    probe: Manifest = (
        {"httpGet": {"path": spec.readiness_path, "port": answer}}
        if spec.readiness_path
        else {"tcpSocket": {"port": answer}}
    )
    body: Manifest = {
        "name": CONTAINER,
        "image": spec.image or nb.image,
        "command": list(target.argv),
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "ports": [{"containerPort": p, "protocol": "TCP"} for p in spec.ports or [answer]],
        "readinessProbe": {**probe, "periodSeconds": 5},
        "securityContext": container_security(),
    }
    amounts = resource_amounts(spec.resources, nb)
    if amounts:
        body["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
    if spec.folder:
        body["workingDir"] = spec.folder
    if nb.mounts:
        body["volumeMounts"] = list(nb.mounts)
    return body


def pod_spec(spec: ServiceSpec, target: ServiceTarget, nb: NotebookEnv) -> Manifest:
    """The pod of one replica: restricted, no API token, the group's placement."""
    pod: Manifest = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": pod_security(nb),
        "containers": [container(spec, target, nb)],
    }
    if nb.volumes:
        pod["volumes"] = list(nb.volumes)
    selector = dict(nb.node_selector)
    if isinstance(request := pod_gpus(spec.resources, nb), GpuRequest):
        selector.update(request.selector)
    if selector:
        pod["nodeSelector"] = selector
    tolerations = list(nb.tolerations)
    if spec.resources.gpus:
        tolerations.append({"key": nb.gpu_resource, "operator": "Exists", "effect": "NoSchedule"})
    if tolerations:
        pod["tolerations"] = tolerations
    return pod


# -- Deployment, Service, HorizontalPodAutoscaler ------------------------------------------------


def deployment(spec: ServiceSpec, target: ServiceTarget, nb: NotebookEnv) -> Manifest:
    name = version_name(spec.name, spec.version)
    selector = {SERVICE: spec.name, VERSION: spec.version}
    meta = _meta(name, spec, target)
    meta["annotations"] = service_annotations(spec, target)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": spec.replicas.min,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels(spec, target)}, "spec": pod_spec(spec, target, nb)},
        },
    }


def service(spec: ServiceSpec, target: ServiceTarget, version: str | None = None) -> Manifest:
    """A ClusterIP Service: one version's (`version` None: this spec's), or, with `version`
    given, the stable one named after the service, pointing at that version."""
    stable = version is not None
    chosen = version if stable else spec.version
    answer = port(spec)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(
            spec.name if stable else version_name(spec.name, spec.version), spec, target, not stable
        ),
        "spec": {
            "type": "ClusterIP",
            "selector": {SERVICE: spec.name, VERSION: str(chosen)},
            "ports": [{"name": "http", "port": answer, "targetPort": answer, "protocol": "TCP"}],
        },
    }


def autoscaler(spec: ServiceSpec, target: ServiceTarget) -> Manifest | None:
    """Between replicas.min and replicas.max on CPU and memory (the requests' 80%), and on the
    GPU metric when the lab names one and the service asks for GPUs; None when it cannot grow."""
    if spec.replicas.max <= spec.replicas.min:
        return None
    metrics: list[Manifest] = [
        {
            "type": "Resource",
            "resource": {
                "name": resource,
                "target": {"type": "Utilization", "averageUtilization": UTILIZATION},
            },
        }
        for resource in ("cpu", "memory")
    ]
    if target.gpu_metric and spec.resources.gpus:
        metrics.append(
            {
                "type": "Pods",
                "pods": {
                    "metric": {"name": target.gpu_metric},
                    "target": {"type": "AverageValue", "averageValue": str(UTILIZATION)},
                },
            }
        )
    name = version_name(spec.name, spec.version)
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(name, spec, target),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": spec.replicas.min,
            "maxReplicas": spec.replicas.max,
            "metrics": metrics,
        },
    }


def version_objects(spec: ServiceSpec, target: ServiceTarget, nb: NotebookEnv) -> list[Manifest]:
    """One version without KServe, in creation order: its Deployment, Service and autoscaler."""
    check(spec, nb, kserve=False)
    scaler = autoscaler(spec, target)
    return [deployment(spec, target, nb), service(spec, target), *([scaler] if scaler else [])]


# -- KServe ---------------------------------------------------------------------------------------


def inference_service(
    spec: ServiceSpec, target: ServiceTarget, nb: NotebookEnv, canary: int | None = None
) -> Manifest:
    """The InferenceService whose predictor is this version: a custom container (the same pod as
    without KServe) scaled by KServe; `canary` gives this (latest) revision that percent of
    traffic and the previous rolled-out one the rest."""
    check(spec, nb, kserve=True)
    pod = pod_spec(spec, target, nb)
    predictor: Manifest = {
        **pod,
        "minReplicas": spec.replicas.min,
        "maxReplicas": spec.replicas.max,
        "labels": labels(spec, target),
        "annotations": {LINEAGE_ANNOTATION: service_annotations(spec, target)[LINEAGE_ANNOTATION]},
    }
    if canary is not None:
        predictor["canaryTrafficPercent"] = canary
    meta = _meta(spec.name, spec, target)
    meta["labels"][KSERVE_VISIBILITY] = "cluster-local"
    meta["annotations"] = service_annotations(spec, target)
    return {
        "apiVersion": KSERVE_API,
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {"predictor": predictor},
    }
