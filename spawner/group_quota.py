"""A project group's "all members together" quota, enforced by the API server.

Kubernetes' ResourceQuota counts one namespace, and each user has their own. So the group's
total is divided among its members, and each member namespace's ResourceQuota holds the tighter
of the user quota and that share: whatever a member's notebook token asks for (a Job through
the REST API, the CLI or the Kubernetes API directly), the members together can never hold more
than the group's quota. The price is that a member cannot borrow an idle member's share; a
shared group namespace or Kueue would allow that and are not built (see docs/security.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from kubelab.quantity import parse_quantity

from .groups import Quota


def members_of(user: Any, group: str) -> int | None:
    """How many hub users are in `group` (the user's ORM groups carry their users); None if unknown."""
    for entry in getattr(user, "groups", None) or []:
        if entry.name == group:
            users: Iterable[Any] | None = getattr(entry, "users", None)
            return None if users is None else max(1, len(list(users)))
    return None


def _share(value: str | None, members: int, unit: Decimal, suffix: str) -> str | None:
    if value is None:
        return None
    amount = (parse_quantity(value) / members / unit).to_integral_value(rounding=ROUND_FLOOR)
    return f"{int(amount)}{suffix}"


def member_share(group: Quota, members: int) -> Quota:
    """Each member's part of the group's quota, rounded down (whole GPUs, millicores, bytes)."""
    return Quota(
        gpus=None if group.gpus is None else group.gpus // members,
        cpu=_share(group.cpu, members, Decimal("0.001"), "m"),
        memory=_share(group.memory, members, Decimal(1), ""),
    )


def _tighter(a: str | int | None, b: str | int | None) -> Any:
    if a is None or b is None:
        return b if a is None else a
    return a if parse_quantity(a) <= parse_quantity(b) else b


def namespace_quota(user: Quota, group: Quota, members: int | None) -> Quota:
    """What one member's namespace may hold: the user quota, within the member's share of the
    group quota. With the membership unknown (`public` without a hub group), the group's whole
    quota caps each member."""
    share = group if members is None else member_share(group, members)
    return Quota(
        gpus=_tighter(user.gpus, share.gpus),
        cpu=_tighter(user.cpu, share.cpu),
        memory=_tighter(user.memory, share.memory),
    )
