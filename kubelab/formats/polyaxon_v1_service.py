"""A Polyaxon v1 component whose `run` is `kind: service`, as a kubelab service spec mapping.

Polyaxon's service is one container with `ports` and `replicas`; kubelab reaches it through
Jupyter's proxy at `/kubelab/services/<id>/` behind the user's login, with the prefix stripped
(Polyaxon's `rewritePath: true`). What has no equivalent (`isExternal`, init containers,
sidecars, volumes, connections, a path not rewritten) is refused by name with the reason.
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import FieldError, ValidationError
from kubelab.formats.polyaxon_v1_run import _known, _replica

RUN = ("kind", "container", "environment", "ports", "replicas", "rewritePath", "isExternal", "init")
RUN_REFUSED = ("sidecars", "connections", "volumes")
COMPONENT = ("version", "kind", "name", "description", "tags", "run", "isApproved", "cost")


def is_service_component(data: Any) -> bool:
    """True for a v1 component (or an operation's inline component) whose run is a service."""
    if not isinstance(data, dict):
        return False
    if data.get("kind") == "operation" and isinstance(data.get("component"), dict):
        data = data["component"]
    run = data.get("run")
    return data.get("kind") == "component" and isinstance(run, dict) and run.get("kind") == "service"


def service(data: dict[str, Any]) -> dict[str, Any]:
    """A v1 service component (or an operation holding one inline) -> a service spec mapping."""
    errors: list[FieldError] = []

    def fail(path: str, reason: str) -> None:
        errors.append(FieldError(path, reason))

    prefix, component = "", data
    if data.get("kind") == "operation":
        for key in data:
            if key not in ("version", "kind", "name", "description", "tags", "component", "params"):
                fail(key, "an operation serving a component may give name, description and component")
        if data.get("params"):
            fail("params", "a service component takes no params in kubelab: write the values in")
        prefix, component = "component.", data["component"]
    for key in component:
        if key not in COMPONENT:
            fail(f"{prefix}{key}", "is not read for a service")
    run = component["run"]
    where = f"{prefix}run"
    _known(run, RUN + RUN_REFUSED, where, fail)
    converted: dict[str, Any] = {}
    _replica(run, where, converted, fail)
    spec: dict[str, Any] = {"kind": "service"}
    for key in ("command", "image", "env", "resources"):
        if key in converted:
            spec[key] = converted.pop(key)
    if "workdir" in converted:
        spec["folder"] = converted.pop("workdir")
    for key in converted:  # node selectors, tolerations, an uploaded code folder
        field = f"{where}.container.workingDir" if key == "code" else f"{where}.environment"
        fail(field, f"{key} is not read for a service")
    if run.get("isExternal"):
        fail(f"{where}.isExternal", "a service is reached through Jupyter behind the login, not from outside")
    if run.get("rewritePath") is False:
        fail(f"{where}.rewritePath", "the proxy strips /kubelab/services/<id>/ always: set rewritePath: true")
    for key in ("ports", "replicas"):
        if run.get(key) is not None:
            spec[key] = run[key]
    name = data.get("name") or component.get("name")
    if name:
        spec["name"] = name
    description = data.get("description") or component.get("description")
    if description:
        spec["description"] = description
    if errors:
        raise ValidationError("invalid Polyaxon v1 service", errors)
    return spec
