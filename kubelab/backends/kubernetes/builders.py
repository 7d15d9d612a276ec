"""Kubernetes manifests for an experiment, as plain dicts (pure functions, no API calls).

`build()` returns the objects in creation order; `kubelab render --backend kubernetes`
prints exactly this list, and `KubernetesBackend.submit` sends exactly this list.

Layout:
- one replica: a `batch/v1` Job;
- an elastic run (`replicas: {min, max}`): an Indexed Job and headless Service as below, started
  at `Target.replicas` and resized by kubelab (elastic_policy.py, elastic_resizer.py);
- several replicas (or TensorFlow parameter servers): an Indexed Job whose completion index
  is the rank, plus a headless Service giving each pod the stable name `<job>-<i>.<service>`;
  parameter servers are a second Indexed Job `<job>-ps` behind the same Service;
- `engine: kubeflow`: a PyTorchJob or TFJob; the Training Operator then sets the ranks.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubelab.backends.kubernetes import dra, names
from kubelab.backends.kubernetes.distributed_env import distributed_env, ports_for
from kubelab.backends.kubernetes.elastic_policy import (
    agent_command,
    elastic_env,
    elastic_policy,
    elastic_problems,
)
from kubelab.backends.kubernetes.gpu_request import DraRequest, GpuRequest, gpu_request
from kubelab.backends.kubernetes.init_container import init_containers, init_problems
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.backends.kubernetes.pod_security import container_security, pod_security
from kubelab.backends.kubernetes.priority_classes import KUEUE_PRIORITY_LABEL, class_name, priority_problem
from kubelab.backends.trial_env import trial_env as common_trial_env
from kubelab.errors import FieldError, ValidationError
from kubelab.priorities import LOW_PRIORITY, NORMAL_PRIORITY
from kubelab.records import RunDirectory
from kubelab.shims import SHIMS_DIR
from kubelab.spec import ExperimentSpec, Resources

CONTAINER = "trainer"
KUBEFLOW_CONTAINER = {"pytorch": "pytorch", "tensorflow": "tensorflow"}
TTL_AFTER_FINISHED = 7 * 24 * 3600  # keep finished Jobs a week: pods keep their logs that long
RETRY_NEVER_EXIT_CODES = [126, 127]  # not executable / not found: a retry cannot help
SHM_VOLUME = "dshm"
Manifest = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """Where one run goes: its id, its run directory (on the shared volume) and its owner."""

    run_id: str
    run_dir: str
    name: str
    user: str
    namespace: str | None = None
    sweep: str | None = None
    trial: int | None = None
    pipeline: str | None = None
    pipeline_step: str | None = None
    replicas: int | None = None  # an elastic run's first size (what the free GPUs allow); else max

    @property
    def service(self) -> str:
        return self.name

    @property
    def ps_job(self) -> str:
        return names.ps_job_name(self.name)


GPU_VISIBILITY = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")


def is_distributed(spec: ExperimentSpec) -> bool:
    return spec.replicas > 1 or spec.parameter_servers > 0 or spec.elastic is not None


def build(spec: ExperimentSpec, target: Target, nb: NotebookEnv) -> list[Manifest]:
    """Every object `submit` creates for this run, in creation order."""
    check(spec, nb)
    claims = pod_gpus(spec.resources, nb)
    template = []  # DRA: the claim template the run's pods claim their GPUs from
    if isinstance(claims, DraRequest):
        template.append(dra.claim_template(claims, target.name, labels(spec, target)))
    if spec.engine == "kubeflow":
        return [kubeflow_job(spec, target, nb)] + template
    objects: list[Manifest] = []
    if is_distributed(spec):
        objects.append(headless_service(spec, target))
    objects.append(job(spec, target, nb))
    if spec.parameter_servers:
        objects.append(job(spec, target, nb, role="ps"))
    return objects + template


def check(spec: ExperimentSpec, nb: NotebookEnv) -> None:
    """What the cluster cannot run as written, named by field, before anything is created."""
    problems = []
    if not (spec.image or nb.image):
        problems.append(
            FieldError("image", "is required: the notebook's image is unknown (KUBELAB_IMAGE is not set)")
        )
    if spec.engine == "kubeflow" and spec.framework not in KUBEFLOW_CONTAINER:
        problems.append(
            FieldError(
                "engine",
                "kubeflow runs framework pytorch or tensorflow; "
                f"use engine: job for framework {spec.framework}",
            )
        )
    # The project group's placement and the GPU visibility are the lab's, not the spec's.
    placed = {**nb.node_selector, **({nb.gpu_type_label: ""} if spec.resources.gpu_type else {})}
    for key, value in spec.node_selector.items():
        if key in nb.node_selector and value != nb.node_selector[key]:
            problems.append(
                FieldError(
                    f"node_selector.{key}",
                    "your project group places pods on "
                    f"{key}={nb.node_selector[key]}; a spec cannot change that",
                )
            )
        elif key == nb.gpu_type_label and key in placed:
            problems.append(FieldError(f"node_selector.{key}", "is set by resources.gpu_type"))
    if isinstance(request := pod_gpus(spec.resources, nb), FieldError):
        problems.append(request)
    problem = priority_problem(spec.priority, nb.priority_classes)
    if problem is not None:
        problems.append(problem)
    elif spec.priority <= LOW_PRIORITY and not spec.preemptible:
        why = "on Kubernetes the scheduler preempts any lower-priority pod; ask for normal to keep GPUs"
        problems.append(FieldError("preemptible", why))
    if spec.resources.gpu_indices is not None:
        problems.append(
            FieldError(
                "resources.gpu_indices",
                "picks GPUs of one machine; on Kubernetes the node's GPUs are given by its device plugin",
            )
        )
    # `environment` is built into an image first (image_stage.py); `init` is an init container
    problems += init_problems(spec, nb) + elastic_problems(spec)
    for name in GPU_VISIBILITY:
        if name in spec.env:
            problems.append(FieldError(f"env.{name}", "is set by kubelab from resources.gpus"))
    if problems:
        raise ValidationError("cannot run this experiment on Kubernetes", problems)


# -- metadata -------------------------------------------------------------------------------


def labels(spec: ExperimentSpec, target: Target, role: str | None = None) -> dict[str, str]:
    values = {
        names.MANAGED_BY: names.MANAGER,
        "app.kubernetes.io/name": "kubelab-experiment",
        names.USER: names.label_value(target.user),
        names.EXPERIMENT: target.run_id,
    }
    if target.sweep:
        values[names.SWEEP] = names.label_value(target.sweep)
    if target.pipeline:  # `kubectl get jobs -l kubelab.io/pipeline=ID`
        values[names.PIPELINE] = names.label_value(target.pipeline)
        values[names.PIPELINE_STEP] = names.label_value(target.pipeline_step or "")
    if role:
        values[names.ROLE] = role
    return values


def run_annotations(spec: ExperimentSpec, target: Target) -> dict[str, str]:
    data = spec.to_dict()
    if spec.code and spec.code.source is not None:  # the snapshot is in the run directory
        data["code"] = {"path": None, "source": "<in code/>", "filename": spec.code.filename}
    return {
        names.SPEC_ANNOTATION: json.dumps(data, sort_keys=True, separators=(",", ":")),
        names.RUN_DIR_ANNOTATION: target.run_dir,
        names.USER_ANNOTATION: target.user,
    }


def metadata(
    spec: ExperimentSpec, target: Target, name: str, role: str | None = None, queue: bool = False
) -> Manifest:
    meta: Manifest = {
        "name": name,
        "labels": labels(spec, target, role),
        "annotations": run_annotations(spec, target),
    }
    if target.namespace:
        meta["namespace"] = target.namespace
    if queue and spec.queue:
        meta["labels"][names.QUEUE_LABEL] = spec.queue
        if spec.priority != NORMAL_PRIORITY:  # Kueue orders and preempts workloads by this class
            meta["labels"][KUEUE_PRIORITY_LABEL] = class_name(spec.priority)
    return meta


# -- plain Jobs -----------------------------------------------------------------------------


def headless_service(spec: ExperimentSpec, target: Target) -> Manifest:
    """DNS for `<job>-<i>.<service>`; addresses are published before pods are ready so that
    rank 0 can be found while everyone is still starting up."""
    port = ports_for(spec.framework)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {k: v for k, v in metadata(spec, target, target.service).items() if k != "annotations"},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {names.EXPERIMENT: target.run_id, names.USER: names.label_value(target.user)},
            "ports": [{"name": "rendezvous", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def job(spec: ExperimentSpec, target: Target, nb: NotebookEnv, role: str = "worker") -> Manifest:
    distributed = is_distributed(spec)
    name = target.ps_job if role == "ps" else target.name
    count = spec.parameter_servers if role == "ps" else spec.replicas
    meta = metadata(spec, target, name, role, queue=True)
    if spec.elastic is not None:  # resized by kubelab between min and max (elastic_resizer.py)
        count = max(spec.elastic.min, min(spec.elastic.max, target.replicas or spec.elastic.max))
        meta["annotations"][names.ELASTIC_ANNOTATION] = f"{spec.elastic.min}:{spec.elastic.max}"
    template = pod_template(spec, target, nb, role)
    if distributed:
        template["spec"]["subdomain"] = target.service
    body: Manifest = {
        "backoffLimit": spec.retries,
        "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
        "podFailurePolicy": pod_failure_policy(),
        "template": template,
    }
    if spec.timeout:
        body["activeDeadlineSeconds"] = max(1, math.ceil(spec.timeout))
    if distributed:
        body.update(completionMode="Indexed", completions=count, parallelism=count)
    if spec.queue:
        body["suspend"] = True  # Kueue admits (unsuspends) it when the queue has quota
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": body,
    }


def pod_failure_policy() -> Manifest:
    """Node disruptions (eviction, preemption, drain) are retried without counting against
    `retries`; a command that cannot run fails at once; other exits count as usual."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": CONTAINER,
                    "operator": "In",
                    "values": RETRY_NEVER_EXIT_CODES,
                },
            },
        ]
    }


def pod_template(
    spec: ExperimentSpec,
    target: Target,
    nb: NotebookEnv,
    role: str = "worker",
    container_name: str = CONTAINER,
    with_ranks: bool = True,
) -> Manifest:
    env = trial_env(spec, target, nb)
    if not spec.resources.gpus or role == "ps":
        # On a GPU node the NVIDIA runtime shows every GPU to a container that asks for none.
        env.append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"})
    if with_ranks and spec.elastic is not None:
        env += elastic_env(spec.elastic, target.run_id, target.name, target.service, spec.framework)
    elif with_ranks and is_distributed(spec):
        env += distributed_env(spec, target.name, target.service, target.ps_job, role)
    volumes = list(nb.volumes)
    mounts = list(nb.mounts)
    shm = spec.resources.shm or nb.shm
    if shm:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm}})
        mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    container: Manifest = {
        "name": container_name,
        "image": spec.image or nb.image,
        "command": agent_command(spec.rendered_command()) if spec.elastic else spec.rendered_command(),
        "env": env,
        "resources": container_resources(spec, nb, role),
        "securityContext": container_security(),
    }
    if spec.workdir:
        container["workingDir"] = spec.workdir
    if mounts:
        container["volumeMounts"] = mounts
    pod: Manifest = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # training code needs no API access
        "enableServiceLinks": False,
        "securityContext": pod_security(nb),
        "containers": [container],
    }
    amounts = resource_amounts(spec.resources, nb, gpus=False)
    limits = {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}
    if steps := init_containers(spec, target.run_dir, nb, limits):
        pod["initContainers"] = steps
    if nb.service_account:
        pod["serviceAccountName"] = nb.service_account
    if nb.priority_classes:
        pod["priorityClassName"] = class_name(spec.priority)
    if volumes:
        pod["volumes"] = volumes
    selector = {**spec.node_selector, **nb.node_selector}  # the group's placement wins (check refuses)
    request = pod_gpus(spec.resources, nb)
    if isinstance(request, GpuRequest) and role != "ps":
        selector.update(request.selector)
    elif isinstance(request, DraRequest) and role != "ps":
        dra.attach(pod, target.name)  # the devices' node is the scheduler's pick, by the claim
    if selector:
        pod["nodeSelector"] = selector
    tolerations = [*nb.tolerations, *spec.tolerations]
    if spec.resources.gpus and role != "ps":
        tolerations.append({"key": nb.gpu_resource, "operator": "Exists", "effect": "NoSchedule"})
    if tolerations:
        pod["tolerations"] = tolerations
    return {"metadata": {"labels": labels(spec, target, role)}, "spec": pod}


def container_resources(spec: ExperimentSpec, nb: NotebookEnv, role: str) -> Manifest:
    """Requests equal limits (Guaranteed QoS); parameter servers get CPU and memory only."""
    amounts = resource_amounts(spec.resources, nb, gpus=role != "ps")
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def resource_amounts(resources: Resources, nb: NotebookEnv, gpus: bool = True) -> dict[str, str]:
    """CPU, memory and (with `gpus`) the cluster's GPU resource a spec's `resources` ask for."""
    amounts: dict[str, str] = {}
    if resources.cpu:
        amounts["cpu"] = resources.cpu
    if resources.memory:
        amounts["memory"] = resources.memory
    if gpus and isinstance(request := pod_gpus(resources, nb), GpuRequest):
        amounts[request.resource] = str(request.amount)
    return amounts


def pod_gpus(resources: Resources, nb: NotebookEnv) -> GpuRequest | DraRequest | FieldError | None:
    """The GPU resource, count and node labels a spec's `resources` come to on this cluster."""
    return gpu_request(resources.gpus, resources.gpu_type, nb.gpu_types, nb.gpu_resource, nb.gpu_type_label)


def trial_env(spec: ExperimentSpec, target: Target, nb: NotebookEnv) -> list[Manifest]:
    """The trial's environment contract (docs/spec.md); it wins over the spec's own `env`."""
    run = RunDirectory(Path(target.run_dir))  # the path inside the pods (the workspace claim's)
    values = dict(spec.env)
    values.update(
        common_trial_env(
            run,
            spec,
            code=spec.code is not None,
            shims=str(run.path / SHIMS_DIR),  # staged by submit
            python_path=spec.env.get("PYTHONPATH"),
            sweep=target.sweep,
            trial=target.trial,
            platform="kubernetes",
        ),
        KUBELAB_USER=target.user,
    )
    if nb.home:
        values["KUBELAB_HOME"] = nb.home
    return [{"name": k, "value": v} for k, v in values.items()]


# -- Kubeflow Training Operator ---------------------------------------------------------------


def kubeflow_job(spec: ExperimentSpec, target: Target, nb: NotebookEnv) -> Manifest:
    """A PyTorchJob (Master + Workers) or TFJob (Workers + PS); the operator sets the ranks."""
    container = KUBEFLOW_CONTAINER[spec.framework]
    restart = "OnFailure" if spec.retries else "Never"

    def replica(count: int, role: str = "worker") -> Manifest:
        template = pod_template(spec, target, nb, role, container, with_ranks=False)
        return {"replicas": count, "restartPolicy": restart, "template": template}

    if spec.framework == "pytorch":
        kind, key = "PyTorchJob", "pytorchReplicaSpecs"
        replicas = {"Worker": replica(spec.replicas)} if spec.elastic else {"Master": replica(1)}
        if spec.replicas > 1 and not spec.elastic:
            replicas["Worker"] = replica(spec.replicas - 1)
    else:
        kind, key = "TFJob", "tfReplicaSpecs"
        replicas = {"Worker": replica(spec.replicas)}
        if spec.parameter_servers:
            replicas["PS"] = replica(spec.parameter_servers, "ps")
    run_policy: Manifest = {
        "backoffLimit": spec.retries,
        "cleanPodPolicy": "All",
        "ttlSecondsAfterFinished": TTL_AFTER_FINISHED,
    }
    if spec.timeout:
        run_policy["activeDeadlineSeconds"] = max(1, math.ceil(spec.timeout))
    if spec.queue:
        run_policy["suspend"] = True
    job_spec: Manifest = {key: replicas, "runPolicy": run_policy}
    if spec.elastic:
        job_spec["elasticPolicy"] = elastic_policy(spec.elastic)
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": metadata(spec, target, target.name, queue=True),
        "spec": job_spec,
    }
