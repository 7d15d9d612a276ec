"""From raw `user_options` and a user's hub groups to validated options and a project group:
the step both spawners and `kubelab hub render` share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .groups import ProjectGroup, choose_group, user_groups
from .pod_settings import group_shm
from .profiles import Catalog, NotebookOptions, validate_options


def hub_memberships(user: Any) -> list[tuple[str, Mapping[str, Any] | None]]:
    """(name, properties) of a JupyterHub user's groups (ORM groups carry `properties`)."""
    return [(g.name, getattr(g, "properties", None) or {}) for g in getattr(user, "groups", None) or []]


def public_properties(spawner: Any, configured: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """Everyone is in `public`: its properties are the hub group's when the hub has one (even if
    the user was never added to it), else the spawner's configured ones."""
    orm_user = getattr(getattr(spawner, "user", None), "orm_user", None)
    if orm_user is not None:  # the user's own database session (Spawner.db is deprecated)
        from jupyterhub import orm
        from sqlalchemy import inspect

        session = inspect(orm_user).session
        group = session.query(orm.Group).filter_by(name="public").first() if session else None
        if group is not None:
            return group.properties or {}
    return configured


def choose(
    raw: Any,
    catalog: Catalog,
    memberships: list[tuple[str, Mapping[str, Any] | None]],
    public_properties: Mapping[str, Any] | None = None,
    local: bool = False,
) -> tuple[NotebookOptions, ProjectGroup]:
    """Validated options and the chosen group, or a ValidationError naming each field (`local`:
    on one machine, whose ledger shares any GPU)."""
    groups = user_groups(memberships, public_properties)
    options = dict(raw or {}) if isinstance(raw, dict) else raw
    group = choose_group(groups, options.get("group") if isinstance(options, dict) else None)
    if isinstance(options, dict) and not options.get("shm") and group_shm(group):
        options["shm"] = group_shm(group)
    return validate_options(options, catalog, group.name, list(group.images), local), group
