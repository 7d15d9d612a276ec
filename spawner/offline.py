"""A KubeLabSpawner built from a hub configuration without a running hub: the user and the
groups it would see, from `load_groups`. What `kubelab hub render` and `reconcile` ask it for."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from kubelab.errors import FieldError, ValidationError

if TYPE_CHECKING:
    from .kube import KubeLabSpawner


def group_properties(config: Any, names: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The hub's memberships for `names` (and `public`) with their configured properties."""
    declared = dict(config.JupyterHub.get("load_groups", {}) or {})
    memberships = []
    for name in [*names, "public"]:
        if name not in declared and name != "public":
            raise ValidationError(
                "invalid server options",
                [
                    FieldError(
                        "group",
                        f"group '{name}' is not declared in JupyterHub.load_groups of the config "
                        f"(groups: {', '.join(sorted(declared)) or 'none'})",
                    )
                ],
            )
        entry = declared.get(name) or {}
        memberships.append((name, entry.get("properties", {}) if isinstance(entry, dict) else {}))
    return memberships


def declared_users(entry: Any) -> list[str] | None:
    """A load_groups entry's members (a dict's `users`, or the older plain list), None if unknown."""
    if isinstance(entry, dict) and isinstance(entry.get("users"), list):
        return list(entry["users"])
    return list(entry) if isinstance(entry, list) else None


async def offline_spawner(config: Any, user: str, groups: list[str]) -> KubeLabSpawner:
    """The spawner `user` would get, with stand-ins for the hub and the user's memberships."""
    from .kube import KubeLabSpawner

    hub = types.SimpleNamespace(
        public_host="", url="http://hub:8081/hub/", base_url="/hub/", api_url="http://hub:8081/hub/api"
    )
    declared = dict(config.JupyterHub.get("load_groups", {}) or {})
    member = [
        types.SimpleNamespace(name=n, properties=p, users=declared_users(declared.get(n)))
        for n, p in group_properties(config, groups)
    ]
    account = types.SimpleNamespace(name=user, id=0, url=f"/user/{user}/", escaped_name=user, groups=member)
    return KubeLabSpawner(config=config, user=account, hub=hub)
