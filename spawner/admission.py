"""Admission: refuse a notebook that cannot get what it asks for, before any pod exists.

A pod asking for more GPUs than are free would sit Pending with a scheduler message few users
read; one beyond a quota would be refused by Kubernetes after the namespace was prepared. Here
the user reads, in the form, why and what they can have instead.
"""

from __future__ import annotations

from decimal import Decimal

from kubelab.errors import FieldError, ValidationError
from kubelab.gpu_share import is_fraction
from kubelab.quantity import parse_quantity

from .availability import Availability, Usage, group_label
from .groups import ProjectGroup, Quota
from .profiles import NotebookOptions

REFUSED = "this server cannot start now"


def admit(
    options: NotebookOptions,
    group: ProjectGroup,
    user: str,
    availability: Availability,
    held: Usage | None = None,
) -> None:
    """Raise ValidationError with one sentence per reason, or return when the request fits.

    `held` is what the user holds when the caller can tell it by their own namespace's pods; else
    the availability's count for the user. Both that and the group's count go by the user
    namespace a pod is in (its user and group as the hub wrote them), never by the pod's labels,
    except outside user namespaces (trusted-lab mode), where labels are all there is."""
    errors: list[FieldError] = []
    if options.gpus and options.gpu_type not in availability.unknown:  # unknown: the scheduler's
        free = availability.free(options.gpu_type)
        shares = is_fraction(options.gpus) and availability.room(options.gpu_type) >= options.gpus - 1e-9
        if options.units > free and not shares:
            kind = f" {options.gpu_type}" if options.gpu_type else ""
            errors.append(
                FieldError(
                    "gpus",
                    (
                        f"you asked for {options.gpus}{kind} GPU(s) but only {free} of "
                        f"{availability.total(options.gpu_type)} are free now; "
                        f"free by type: {_free_list(availability)}"
                    ),
                )
            )
    asked = Usage(options.units, parse_quantity(options.cpu), parse_quantity(options.memory))
    _check_quota(
        errors,
        group.user_quota,
        availability.user(user) if held is None else held,
        asked,
        f"group '{group.name}' allows each user",
        "you hold",
    )
    _check_quota(
        errors,
        group.group_quota,
        availability.group(group_label(group.name)),
        asked,
        f"group '{group.name}' allows all its members together",
        "its members hold",
    )
    if errors:
        raise ValidationError(REFUSED, errors)


def _check_quota(
    errors: list[FieldError], quota: Quota, held: Usage, asked: Usage, who: str, holder: str
) -> None:
    for key, unit in (("gpus", "GPU(s)"), ("cpu", "CPU"), ("memory", "of memory")):
        limit = quota.amount(key)
        if limit is None:
            continue
        have, want = Decimal(getattr(held, key)), Decimal(getattr(asked, key))
        if have + want > limit:
            left = max(Decimal(0), limit - have)
            errors.append(
                FieldError(
                    key,
                    (
                        f"{who} {_show(key, limit)} {unit} at once; {holder} {_show(key, have)}, "
                        f"so you can ask for at most {_show(key, left)} more, not {_show(key, want)}"
                    ),
                )
            )


def _show(key: str, amount: Decimal) -> str:
    if key == "memory":
        gib = amount / 2**30
        return f"{gib.normalize():f}Gi" if gib == gib.to_integral_value() else f"{(gib):.2f}Gi"
    return f"{amount.normalize():f}"


def _free_list(availability: Availability) -> str:
    if not availability.types:
        return "none (no GPU nodes)"
    return ", ".join(f"{name} {c.free}/{c.total}" for name, c in availability.types.items())
