"""Run priorities: `low`, `normal`, `high` or an int, one scale for every backend.

The numbers are those of kubelab's PriorityClasses on Kubernetes (`kubelab-low`,
`kubelab-normal`, `kubelab-high`), so a run means the same locally and on a cluster. Low runs
are preemptible unless the spec says otherwise; others are not.
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import FieldError

LOW_PRIORITY, NORMAL_PRIORITY, HIGH_PRIORITY = 100, 1000, 10000
PRIORITY_NAMES = {"low": LOW_PRIORITY, "normal": NORMAL_PRIORITY, "high": HIGH_PRIORITY}
MAX_PRIORITY = 1_000_000_000  # Kubernetes reserves larger values for system classes
CAP_ENV = "KUBELAB_MAX_PRIORITY"  # the group's cap, set by the local hub for each server


def over_cap(priority: int, cap: str | None) -> FieldError | None:
    """The problem with `priority` above the group's cap (a priority name), or None."""
    if not cap or cap.strip().lower() not in PRIORITY_NAMES:
        return None
    name = cap.strip().lower()
    if priority <= PRIORITY_NAMES[name]:
        return None
    return FieldError("priority", f"your group allows at most {name}, not {priority_name(priority)}")


def parse_priority(value: Any) -> tuple[int, str]:
    """(priority, "") or (0, why): a name or a whole number between 0 and 1e9."""
    if isinstance(value, str) and value.strip().lower() in PRIORITY_NAMES:
        return PRIORITY_NAMES[value.strip().lower()], ""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0, f"must be low, normal, high or a whole number, not {value!r}"
    if not 0 <= value <= MAX_PRIORITY:
        return 0, f"must be between 0 and {MAX_PRIORITY}, not {value}"
    return value, ""


def priority_name(value: int) -> str:
    for name, number in PRIORITY_NAMES.items():
        if number == value:
            return name
    return str(value)


def default_preemptible(priority: int) -> bool:
    return priority <= LOW_PRIORITY


def read_preemption(data: dict[str, Any]) -> tuple[int, bool, list[FieldError]]:
    """A spec's `priority` and `preemptible` (defaulted from the priority), and what is wrong."""
    problems: list[FieldError] = []
    priority = NORMAL_PRIORITY
    if data.get("priority") is not None:
        priority, problem = parse_priority(data["priority"])
        if problem:
            problems.append(FieldError("priority", problem))
            priority = NORMAL_PRIORITY
    preemptible = data.get("preemptible")
    if preemptible is None:
        return priority, default_preemptible(priority), problems
    if not isinstance(preemptible, bool):
        problems.append(FieldError("preemptible", f"must be true or false, not {preemptible!r}"))
        return priority, default_preemptible(priority), problems
    return priority, preemptible, problems
