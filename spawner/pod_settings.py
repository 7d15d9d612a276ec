"""What a notebook pod gets from the chosen options and group: resources, placement,
volumes and the environment contract the Kubernetes backend reads as experiment defaults.

Pure: the spawner applies these to KubeSpawner's own settings, so everything KubeSpawner
builds (labels, security contexts, lifecycle hooks, ...) stays as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kubelab.backends.kubernetes.gpu_request import types_json
from kubelab.backends.kubernetes.priority_classes import NOTEBOOK_CLASS
from kubelab.gpu_share import is_fraction

from . import dra_claims, interfaces, storage_layout
from .availability import GROUP_LABEL, USER_LABEL, group_label
from .groups import ProjectGroup
from .objects import Storage
from .profiles import DEFAULT_GPU_RESOURCE, Catalog, NotebookOptions
from .storage_layout import WORKSPACE_ROOT
from .volumes import VolumeMount, check_unique_paths, kubernetes_volumes

SHM_PATH = "/dev/shm"
SHM_VOLUME = "dshm"


@dataclass
class PodSettings:
    image: str
    cpu: str
    memory: str
    gpu_limits: dict[str, int] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    priority_class: str | None = None  # with kubelab's PriorityClasses: no run preempts a notebook
    default_url: str = interfaces.URLS[interfaces.DEFAULT]
    dra_template: dict[str, Any] | None = None  # a DRA type's ResourceClaimTemplate, claimed by the pod


def workspace_path(user: str) -> str:
    return f"{WORKSPACE_ROOT}/{user}"


def pod_settings(
    user: str,
    raw_user: str,
    ns: str,
    options: NotebookOptions,
    group: ProjectGroup,
    catalog: Catalog,
    storage: Storage,
    account: str,
    priority_classes: bool = False,
) -> PodSettings:
    """Settings for `user` (a safe slug: used in paths and subPaths, so two users never share).
    With `priority_classes` the notebook runs at its own class and tells its runs they exist."""
    gpu_type = catalog.gpu_type(options.gpu_type) if options.gpu_type else None
    claimed = gpu_type is not None and gpu_type.sharing == "dra" and bool(options.gpus)
    resource = (
        gpu_type.resource
        if gpu_type and gpu_type.sharing != "dra"
        else next((t.resource for t in catalog.gpu_types if t.sharing != "dra"), DEFAULT_GPU_RESOURCE)
    )
    storage_mounts = storage_layout.mounts(storage, user)
    shm = options.shm
    group_mounts = []
    for mount in group.volume_mounts:  # a group's memory /dev/shm is its default size, not a second mount
        if mount.kind == "memory" and mount.path.rstrip("/") == SHM_PATH:
            continue
        group_mounts.append(mount)
    volumes, mounts = kubernetes_volumes(
        storage_mounts + _distinct(group_mounts, storage_mounts, user),
        user,
        field=f"groups.{group.name}.volume_mount",
    )
    shared_volumes, shared_mounts = list(volumes), list(mounts)
    volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm}})
    mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    check_unique_paths(mounts, field=f"groups.{group.name}.volume_mount")

    node_selector = dict(group.node_selector)
    tolerations: list[dict[str, Any]] = []
    gpu_limits: dict[str, int] = {}
    if options.gpus:
        tolerations = [dict(t) for t in catalog.gpu_tolerations]
    if options.gpus and not claimed:  # a DRA type's devices are claimed, not a resource or a label
        gpu_limits[resource] = options.units  # a share: one replica of the time-sliced type
        if gpu_type and not gpu_type.by_resource:
            node_selector[catalog.gpu_label] = gpu_type.label_value
    home = workspace_path(user)
    env = {
        "KUBELAB_NAMESPACE": ns,
        "KUBELAB_IMAGE": options.image,
        "KUBELAB_USER": raw_user,
        "KUBELAB_PROJECT": group.name,
        "KUBELAB_NODE_SELECTOR": json.dumps(group.node_selector, sort_keys=True),
        "KUBELAB_TOLERATIONS": json.dumps(catalog.gpu_tolerations),
        "KUBELAB_GPU_RESOURCE": resource,
        "KUBELAB_GPU_TYPE_LABEL": catalog.gpu_label,
        "KUBELAB_GPU_TYPES": types_json(catalog.gpu_types),
        "KUBELAB_GPU_TYPE": gpu_type.label_value if (gpu_type and options.gpus) else "",
        "KUBELAB_VOLUMES": json.dumps({"volumes": shared_volumes, "mounts": shared_mounts}),
        "KUBELAB_SHM": shm,
        "KUBELAB_HOME": f"{home}/.kubelab",
        "KUBELAB_BACKEND": "kubernetes",
        "KUBELAB_SERVICE_ACCOUNT": account,
        **interfaces.vscode_env(options.interface, home),  # code-server is in the notebook image
    }
    if is_fraction(options.gpus):  # what a run's share is told (docs/gpus.md)
        env["KUBELAB_GPU_FRACTION"] = f"{options.gpus:.6g}"
    if not options.gpus:
        env["NVIDIA_VISIBLE_DEVICES"] = "none"  # images with the NVIDIA runtime would expose all GPUs
    if priority_classes:
        env["KUBELAB_PRIORITY_CLASSES"] = "1"
    return PodSettings(
        image=options.image,
        cpu=options.cpu,
        memory=options.memory,
        gpu_limits=gpu_limits,
        node_selector=node_selector,
        tolerations=tolerations,
        volumes=volumes,
        mounts=mounts,
        env=env,
        working_dir=home,
        labels={USER_LABEL: user, GROUP_LABEL: group_label(group.name)},
        priority_class=NOTEBOOK_CLASS if priority_classes else None,
        default_url=interfaces.URLS[options.interface],
        dra_template=dra_claims.notebook_template(ns, gpu_type, options.units) if claimed else None,
    )


def group_shm(group: ProjectGroup) -> str | None:
    """The size a group's `X(memory):/dev/shm` entry sets, used as its default shm."""
    for mount in group.volume_mounts:
        if mount.kind == "memory" and mount.path.rstrip("/") == SHM_PATH:
            return mount.source
    return None


def _distinct(
    group_mounts: list[VolumeMount], storage_mounts: list[VolumeMount], user: str
) -> list[VolumeMount]:
    """Drop group entries that repeat the workspace or archive exactly (cube-studio groups often
    list `kubeflow-user-workspace(pvc):/mnt/`, which trusted mode mounts anyway)."""
    taken = {(m.kind, m.source, m.mount_path(user), m.per_user, m.sub_path) for m in storage_mounts}
    return [
        m for m in group_mounts if (m.kind, m.source, m.mount_path(user), m.per_user, m.sub_path) not in taken
    ]


def with_quantities(pod: Any, settings: PodSettings) -> Any:
    """KubeSpawner's pod (a client model) with the notebook's CPU and memory written as the
    quantities the user chose (`"2"`, `"8Gi"`): KubeSpawner's float and byte-count traits would
    send `2.0` and `8589934592`, which clients that read quantities as strings refuse."""
    for container in pod.spec.containers:
        if container.name != "notebook" or container.resources is None:
            continue
        for amounts in (container.resources.limits, container.resources.requests):
            if amounts is not None:
                amounts.update({"cpu": settings.cpu, "memory": settings.memory})
    return pod
