"""The defaults an experiment inherits from the notebook it was submitted from.

The spawner (issue 4) sets these variables on the notebook pod; this module is the one
place that reads them, so the contract lives in one file (documented in docs/kubernetes.md).
Malformed values are refused naming the variable, never silently dropped: a lost volume
mount would make a run write its results nowhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab.backends.kubernetes.gpu_request import SharedType, parse_types
from kubelab.errors import FieldError, ValidationError
from kubelab.quantity import parse_quantity

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GPU_TYPE_LABEL = "gpu-type"
DEFAULT_UID = 1000  # jupyter/docker-stacks' jovyan; used when the notebook itself runs as root


@dataclass(frozen=True)
class NotebookEnv:
    namespace: str | None = None
    image: str | None = None
    user: str = "kubelab"
    project: str | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    gpu_type_label: str = DEFAULT_GPU_TYPE_LABEL
    gpu_types: list[SharedType] = field(default_factory=list)  # the hub's catalog: MIG, time-sliced
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    shm: str | None = None
    home: str | None = None
    service_account: str | None = None
    uid: int = DEFAULT_UID
    gid: int = 100
    priority_classes: bool = False  # the cluster has kubelab-low/normal/high (the hub says so)

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, namespace_file: Path = SA_NAMESPACE_FILE
    ) -> NotebookEnv:
        """Read the spawner's variables; raise ValidationError naming each bad one."""
        env = os.environ if environ is None else environ
        problems: list[FieldError] = []
        namespace = env.get("KUBELAB_NAMESPACE") or _read(namespace_file)
        node_selector = _json(env, "KUBELAB_NODE_SELECTOR", dict, {}, problems)
        if any(not isinstance(v, str) for v in node_selector.values()):
            problems.append(FieldError("KUBELAB_NODE_SELECTOR", "values must be strings"))
        tolerations = _json(env, "KUBELAB_TOLERATIONS", list, [], problems)
        if any(not isinstance(t, dict) for t in tolerations):
            problems.append(FieldError("KUBELAB_TOLERATIONS", "must be a list of objects"))
        volumes_doc = _json(env, "KUBELAB_VOLUMES", dict, {}, problems)
        unknown = set(volumes_doc) - {"volumes", "mounts"}
        if unknown:
            problems.append(
                FieldError(
                    "KUBELAB_VOLUMES", f"unknown keys {sorted(unknown)}; expected 'volumes' and 'mounts'"
                )
            )
        volumes = volumes_doc.get("volumes") or []
        mounts = volumes_doc.get("mounts") or []
        if not isinstance(volumes, list) or not isinstance(mounts, list):
            problems.append(FieldError("KUBELAB_VOLUMES", "'volumes' and 'mounts' must be lists"))
            volumes, mounts = [], []
        names = {v.get("name") for v in volumes if isinstance(v, dict)}
        for mount in mounts:
            if not isinstance(mount, dict) or mount.get("name") not in names:
                problems.append(FieldError("KUBELAB_VOLUMES", f"mount {mount!r} names no volume"))
        gpu_types: list[SharedType] = []
        try:
            gpu_types = parse_types(env.get("KUBELAB_GPU_TYPES"))
        except ValueError as exc:
            problems.append(FieldError("KUBELAB_GPU_TYPES", str(exc)))
        shm = env.get("KUBELAB_SHM") or None
        if shm:
            try:
                parse_quantity(shm)
            except ValueError as exc:
                problems.append(FieldError("KUBELAB_SHM", str(exc)))
        if problems:
            raise ValidationError("invalid notebook environment", problems)
        uid, gid = os.getuid(), os.getgid()
        return cls(
            namespace=namespace or None,
            image=env.get("KUBELAB_IMAGE") or env.get("JUPYTER_IMAGE_SPEC") or None,
            user=env.get("KUBELAB_USER") or env.get("JUPYTERHUB_USER") or _login(),
            project=env.get("KUBELAB_PROJECT") or None,
            node_selector=node_selector,
            tolerations=tolerations,
            gpu_resource=env.get("KUBELAB_GPU_RESOURCE") or DEFAULT_GPU_RESOURCE,
            gpu_type_label=env.get("KUBELAB_GPU_TYPE_LABEL") or DEFAULT_GPU_TYPE_LABEL,
            gpu_types=gpu_types,
            volumes=volumes,
            mounts=mounts,
            shm=shm,
            home=env.get("KUBELAB_HOME") or None,
            service_account=env.get("KUBELAB_SERVICE_ACCOUNT") or None,
            priority_classes=(env.get("KUBELAB_PRIORITY_CLASSES") or "").lower() in ("1", "true", "yes"),
            uid=uid if uid else DEFAULT_UID,
            gid=gid if uid else 100,
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _login() -> str:
    import getpass

    return getpass.getuser()


def _json(env: Mapping[str, str], name: str, kind: type, default: Any, problems: list[FieldError]) -> Any:
    text = env.get(name)
    if not text:
        return default
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(FieldError(name, f"is not valid JSON ({exc.msg} at {exc.pos})"))
        return default
    if not isinstance(value, kind):
        wanted = "object" if kind is dict else "list"
        problems.append(FieldError(name, f"must be a JSON {wanted}, not {type(value).__name__}"))
        return default
    return value
