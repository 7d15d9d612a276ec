"""URL grammar of the Kubernetes REST API: which resource, namespace, name and subresource."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError
from .resources import Registry, ResourceType


@dataclass(frozen=True)
class Route:
    """A parsed request path. `kind` is `resource` or one of the discovery documents."""

    kind: str
    group: str = ""
    version: str = ""
    rt: ResourceType | None = None
    namespace: str = ""
    name: str = ""
    subresource: str = ""
    watch_path: bool = False


def not_found_route() -> ApiError:
    return ApiError(404, "the server could not find the requested resource", "NotFound",
                    {})


def parse(path: str, registry: Registry) -> Route:
    parts = [p for p in path.split("/") if p]
    if parts in (["version"], ["healthz"], ["readyz"], ["livez"]):
        return Route(parts[0])
    if parts == ["api"]:
        return Route("api-versions")
    if parts == ["apis"]:
        return Route("api-groups")
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) == 2 and parts[0] == "apis":
        return Route("api-group", group=parts[1])
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise not_found_route()
    if not rest:
        return Route("resource-list", group, version)
    watch = rest[0] == "watch"
    if watch:
        rest = rest[1:]
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces" and registry.lookup(group, version, rest[2]):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise not_found_route()
    rt = registry.lookup(group, version, rest[0])
    if rt is None or (namespace and not rt.namespaced):
        raise not_found_route()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in rt.subresources:
        raise not_found_route()
    if rt.namespaced and name and not namespace:
        raise not_found_route()
    return Route("resource", group, version, rt, namespace, name, sub, watch)


def verb_for(method: str, route: Route, watch: bool) -> str:
    """The RBAC verb of a request."""
    if method == "GET":
        if watch or route.watch_path:
            return "watch"
        return "get" if route.name else "list"
    if method == "DELETE":
        return "delete" if route.name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
