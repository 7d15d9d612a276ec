"""`/kubelab/api/openapi.json`: the API described from the route table itself.

Paths and operations come from the registered handlers and their docstrings, so the
description cannot drift from what is served; schemas describe the shared shapes.
"""

from __future__ import annotations

import re
from typing import Any

from kubelab import __version__, spec_schema
from kubelab.run_record import json_schema
from kubelab.serving.spec import ServiceSpec

METHODS = ("get", "post", "put", "patch", "delete")

ERROR = {
    "type": "object",
    "required": ["error", "detail", "fields"],
    "properties": {
        "error": {"type": "string", "example": "invalid"},
        "detail": {"type": "string"},
        "fields": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "reason": {"type": "string"}},
            },
        },
    },
}

RECORD = json_schema()  # from kubelab.run_record.RunRecord, the one definition

SPEC = spec_schema.json_schema()  # from kubelab.spec.ExperimentSpec, the one definition
SERVICE_SPEC = spec_schema.model_schema(ServiceSpec)  # from kubelab.serving.spec, the one definition
SERVICE_SPEC["properties"]["kind"] = {"type": "string", "enum": ["service"], "description": "service"}
SHARES = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 100}}
TRAFFIC = {
    "type": "object",
    "required": ["traffic"],
    "additionalProperties": False,
    "properties": {
        "traffic": {**SHARES, "description": "percent per version; one version left out takes the rest"},
        "mirror": {**SHARES, "description": "percent of requests copied to a version"},
    },
}
# what a POST takes: to a collection, or to a service's traffic
BODIES = {"experiments": "Spec", "services": "ServiceSpec", r"services/(?P<name>[^/]+)/traffic": "Traffic"}

MAX_INT_ARGUMENT = 2**53 - 1  # what JSON clients count exactly; far past any log's size
WHOLE = {"type": "integer", "minimum": 0, "maximum": MAX_INT_ARGUMENT}
PARAMETERS = {
    "query": {"in": "query", "name": "query", "schema": {"type": "string"}, "description": "PQL filter"},
    "sort": {"in": "query", "name": "sort", "schema": {"type": "string"}, "description": "e.g. -created_at"},
    "follow": {"in": "query", "name": "follow", "schema": {"type": "boolean"}},
    "replica": {"in": "query", "name": "replica", "schema": WHOLE},
    "timestamps": {
        "in": "query",
        "name": "timestamps",
        "schema": {"type": "boolean"},
        "description": "logs: each line led by its time (ISO 8601 UTC) and a space",
    },
    "limit": {"in": "query", "name": "limit", "schema": WHOLE},
    "gpus": {
        "in": "query",
        "name": "gpus",
        "schema": {"type": "number"},
        "description": "preview: GPUs per replica",
    },
    "priority": {
        "in": "query",
        "name": "priority",
        "schema": {"type": "string"},
        "description": "preview: low, normal, high or a number",
    },
    "gpu_type": {
        "in": "query",
        "name": "gpu_type",
        "schema": {"type": "string"},
        "description": "preview: e.g. A100",
    },
    "a": {"in": "query", "name": "a", "schema": {"type": "string"}, "description": "diff: the first run"},
    "b": {"in": "query", "name": "b", "schema": {"type": "string"}, "description": "diff: the second run"},
    "offset": {
        "in": "query",
        "name": "offset",
        "schema": WHOLE,
        "description": "listings: records to skip; logs: the first byte",
    },
    "length": {
        "in": "query",
        "name": "length",
        "schema": WHOLE,
        "description": "logs: bytes to return from offset",
    },
}


def _path(pattern: str) -> tuple[str, list[dict[str, Any]]]:
    names = re.findall(r"\(\?P<(\w+)>[^)]*\)", pattern)
    path = "/kubelab/api/" + re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
    params = [{"in": "path", "name": n, "required": True, "schema": {"type": "string"}} for n in names]
    return path, params


def _names(parameter: str, doc: str) -> bool:
    """Does a handler's docstring name this query parameter (`?name=`, `&name=`)?"""
    return re.search(rf"(?<![\w.-]){parameter}=|\?{parameter}\b", doc) is not None


def document(routes: list[tuple[str, type]]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for pattern, handler in routes:
        path, path_params = _path(pattern)
        operations = {}
        for method in METHODS:
            func = handler.__dict__.get(method)
            if func is None:
                continue
            doc = (func.__doc__ or "").strip()
            query = [PARAMETERS[name] for name in PARAMETERS if _names(name, doc)]
            operation: dict[str, Any] = {
                "summary": doc.splitlines()[0] if doc else f"{method.upper()} {path}",
                "parameters": path_params + query,
                "security": [{"token": []}],
                "responses": {
                    "200": {"description": "OK"},
                    "4XX": {
                        "description": "a request that cannot be served; nothing changed",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                    },
                },
            }
            if method == "post" and pattern in BODIES:
                body = {"$ref": f"#/components/schemas/{BODIES[pattern]}"}
                operation["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                }
            operations[method] = operation
        paths[path] = operations
    return {
        "openapi": "3.1.0",
        "info": {"title": "kubelab", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": {
                "Error": ERROR,
                "Record": RECORD,
                "Spec": SPEC,
                "ServiceSpec": SERVICE_SPEC,
                "Traffic": TRAFFIC,
            },
            "securitySchemes": {
                "token": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "`token <jupyter server token>` or the server's session cookie",
                },
            },
        },
    }
