"""A run not yet submitted, as the Resources panel describes it to ask what it would preempt.

`GET resources/preview?gpus=2&priority=high` (also `gpu_type`, `replicas`, elastic as `1:4`):
the query becomes a spec checked by the spec's own reader, so `gpus` and `priority` mean what
they mean in a submit, and each refusal names the query's field, not the spec's path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubelab.errors import FieldError, ValidationError
from kubelab.spec import ExperimentSpec

# query parameter -> the spec field it stands for
FIELDS = {
    "gpus": "resources.gpus",
    "gpu_type": "resources.gpu_type",
    "priority": "priority",
    "replicas": "replicas",
}
SPEC_FIELDS = {path: name for name, path in FIELDS.items()}


def _number(text: str) -> Any:
    """`2` and `0.5` as numbers; anything else as written, for the spec's reader to refuse."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _query_field(path: str) -> str:
    """The query parameter a spec path came from (`replicas.min` from `replicas`)."""
    top = path.split(".")[0]
    return SPEC_FIELDS.get(path) or ("replicas" if top in ("replicas", "elastic") else path)


def preview_spec(query: Mapping[str, str]) -> ExperimentSpec:
    """The spec of the run `query` describes, or ValidationError naming the query's fields.
    Other parameters are not read (JupyterLab adds a cache-busting one to every GET)."""
    if "gpus" not in query:
        missing = FieldError("gpus", "is required: how many GPUs the new run would ask for")
        raise ValidationError("invalid preview request", [missing])
    resources: dict[str, Any] = {"gpus": _number(query["gpus"])}
    if "gpu_type" in query:
        resources["gpu_type"] = query["gpu_type"]
    data: dict[str, Any] = {"command": ["true"], "resources": resources}
    if "priority" in query:
        priority = query["priority"]
        data["priority"] = int(priority) if priority.strip().isdigit() else priority
    if "replicas" in query:
        replicas = query["replicas"]
        data["replicas"] = int(replicas) if replicas.strip().isdigit() else replicas
        data["framework"] = "pytorch"  # an elastic range is PyTorch's (torchrun)
    try:
        spec = ExperimentSpec.parse(data)
    except ValidationError as exc:
        fields = [FieldError(_query_field(f.path), f.reason) for f in exc.fields]
        raise ValidationError("invalid preview request", fields) from None
    if not spec.resources.gpus:
        raise ValidationError("invalid preview request", [FieldError("gpus", "must be more than 0")])
    return spec
