"""Official OpenAPI schemas (from the `kubernetes-validate` package), loaded once and cached.

The custom resources we serve (Kubeflow training jobs, Kueue) are not in that package; their
schemas are written here in the same style, reusing the core definitions (e.g. a replica's pod
template is checked against the real `PodTemplateSpec`).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

import kubernetes_validate.utils as kv

SCHEMA_VERSION = kv.latest_version()  # e.g. "1.37.0"; the /version endpoint reports the same
DEFS_ID = "https://kubernetes.io/api/_definitions.json"
_DEFS_REF = "/api/_definitions.json#/$defs/"


def _load(name: str, version: str) -> Any:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}-local"
    path = root / name
    if not path.is_file():
        return None
    return json.loads(path.read_text())


@cache
def definitions(version: str = SCHEMA_VERSION) -> dict[str, Any]:
    return _load("_definitions.json", version)


def _replica_specs(prop: str) -> dict[str, Any]:
    replica = {
        "type": "object",
        "properties": {
            "replicas": {"type": ["integer", "null"], "minimum": 0},
            "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode", None]},
            "template": {"$ref": _DEFS_REF + "io.k8s.api.core.v1.PodTemplateSpec"},
        },
        "required": ["template"],
    }
    run_policy = {"type": ["object", "null"], "properties": {
        "cleanPodPolicy": {"enum": ["All", "Running", "None", None]},
        "ttlSecondsAfterFinished": {"type": ["integer", "null"]},
        "activeDeadlineSeconds": {"type": ["integer", "null"]},
        "backoffLimit": {"type": ["integer", "null"]},
        "suspend": {"type": ["boolean", "null"]},
        "schedulingPolicy": {"type": ["object", "null"]},
        "managedBy": {"type": ["string", "null"]},
    }}
    return {"type": "object", "required": [prop], "properties": {
        prop: {"type": "object", "additionalProperties": replica, "minProperties": 1},
        "runPolicy": run_policy,
        "elasticPolicy": {"type": ["object", "null"]},
        "nprocPerNode": {"type": ["string", "null"]},
        "successPolicy": {"type": ["string", "null"]},
        "enableDynamicWorker": {"type": ["boolean", "null"]},
    }}


def _custom(kind: str, api_version: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {
        "apiVersion": {"type": ["string", "null"], "enum": [api_version]},
        "kind": {"type": ["string", "null"], "enum": [kind]},
        "metadata": {"$ref": _DEFS_REF + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
        "status": {"type": ["object", "null"], "x-kubernetes-preserve-unknown-fields": True},
    }
    if spec is not None:
        props["spec"] = spec
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://kubernetes.io/api/{kind.lower()}/custom",
            "type": "object", "properties": props}


_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
CUSTOM_SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    ("kubeflow.org/v1", "PyTorchJob"): _custom("PyTorchJob", "kubeflow.org/v1",
                                               _replica_specs("pytorchReplicaSpecs")),
    ("kubeflow.org/v1", "TFJob"): _custom("TFJob", "kubeflow.org/v1",
                                          _replica_specs("tfReplicaSpecs")),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue"): _custom(
        "LocalQueue", "kueue.x-k8s.io/v1beta1",
        {"type": "object", "required": ["clusterQueue"],
         "properties": {"clusterQueue": {"type": "string"},
                        "stopPolicy": {"enum": ["None", "Hold", "HoldAndDrain", None]}}}),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue"): _custom("ClusterQueue", "kueue.x-k8s.io/v1beta1",
                                                        _OPEN),
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavor"): _custom("ResourceFlavor",
                                                          "kueue.x-k8s.io/v1beta1", _OPEN),
    ("kueue.x-k8s.io/v1beta1", "Workload"): _custom("Workload", "kueue.x-k8s.io/v1beta1", _OPEN),
}


@cache
def kind_schema(api_version: str, kind: str, version: str = SCHEMA_VERSION) -> dict | None:
    """The top-level schema of a kind, or None if neither the package nor we have one."""
    custom = CUSTOM_SCHEMAS.get((api_version, kind))
    if custom is not None:
        return custom
    file_group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    return _load(f"{kind.lower()}-{file_group}.json", version)


def resolve(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """Follow `$ref`s into the shared definitions (one level at a time, as often as needed)."""
    while schema is not None and "$ref" in schema:
        schema = definitions()["$defs"].get(schema["$ref"].rsplit("/", 1)[-1])
    return schema


def child(schema: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """Schema of property `key` (or of a map value) inside an object schema."""
    schema = resolve(schema)
    if schema is None:
        return None
    props = schema.get("properties")
    if props and key in props:
        return props[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def items(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    schema = resolve(schema)
    return schema.get("items") if schema else None
