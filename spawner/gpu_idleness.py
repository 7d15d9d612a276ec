"""When a GPU notebook counts as idle: its GPUs' utilisation, not its kernel's activity.

A kernel that holds an A100 and does nothing is the commonest waste in a shared lab, and
jupyterhub-idle-culler cannot see it: the kernel is alive and the browser tab keeps sending
activity. This module decides, from utilisation samples alone, when a GPU server has been
idle long enough to warn its user, and when (after the warning went unanswered) to stop it.
It is pure: the culler feeds it samples and a clock, so tests drive it with recorded answers.

A group may set its own policy in its properties (`gpu_idle`), as an admin sets quotas:

    {"gpu_idle": {"threshold": 5, "minutes": 30, "warn_minutes": 5}}

`threshold` is the utilisation (percent) under which a sample counts as idle; the server is
stopped after `minutes` of idle samples; the warning comes `warn_minutes` before that. A
"keep running" answer to the warning restarts the clock, once per warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kubelab.errors import FieldError, ValidationError, did_you_mean

Verdict = Literal["busy", "idle", "warn", "cull", "unknown"]
ServerKey = tuple[str, str]  # (user, server name; "" for the default server)
POLICY_KEYS = ("threshold", "minutes", "warn_minutes")


@dataclass(frozen=True)
class IdlePolicy:
    threshold: float = 5.0
    minutes: float = 30.0
    warn_minutes: float = 5.0

    @property
    def seconds(self) -> float:
        return self.minutes * 60

    @property
    def warn_at(self) -> float:
        """Seconds of idleness after which the user is warned."""
        return max(0.0, (self.minutes - self.warn_minutes) * 60)


def parse_idle_policy(value: Any, where: str, default: IdlePolicy | None = None) -> IdlePolicy:
    """A group's `gpu_idle` property over `default`, or a ValidationError naming each bad key."""
    base = default or IdlePolicy()
    if value in (None, {}):
        return base
    if not isinstance(value, Mapping):
        raise ValidationError(
            "invalid GPU idleness policy",
            [FieldError(where, f"must be a mapping of {', '.join(POLICY_KEYS)}, not {value!r}")],
        )
    errors: list[FieldError] = []
    numbers: dict[str, float] = {}
    for key, raw in value.items():
        if key not in POLICY_KEYS:
            errors.append(FieldError(f"{where}.{key}", "unknown key" + did_you_mean(str(key), POLICY_KEYS)))
        elif isinstance(raw, bool) or not isinstance(raw, int | float) or raw < 0:
            errors.append(FieldError(f"{where}.{key}", f"must be a number of at least 0, not {raw!r}"))
        else:
            numbers[key] = float(raw)
    policy = IdlePolicy(**{**base.__dict__, **numbers})
    if not errors and policy.threshold > 100:
        errors.append(FieldError(f"{where}.threshold", "is a utilisation in percent: at most 100"))
    if not errors and policy.warn_minutes > policy.minutes:
        errors.append(FieldError(f"{where}.warn_minutes", f"must not exceed minutes ({policy.minutes:g})"))
    if not errors and policy.minutes == 0:
        errors.append(FieldError(f"{where}.minutes", "must be more than 0"))
    if errors:
        raise ValidationError("invalid GPU idleness policy", errors)
    return policy


@dataclass
class _Clock:
    idle_since: float | None = None
    warned_at: float | None = None


@dataclass
class IdleTracker:
    """Per-server idle clocks, fed one utilisation sample per server per round."""

    clocks: dict[ServerKey, _Clock] = field(default_factory=dict)

    def observe(self, key: ServerKey, now: float, utilisation: float | None, policy: IdlePolicy) -> Verdict:
        """What to do with a server after this sample. None (no source could tell) never
        counts as idle: the server is left to the kernel-activity rule."""
        clock = self.clocks.setdefault(key, _Clock())
        if utilisation is None:
            self.clocks[key] = _Clock()
            return "unknown"
        if utilisation >= policy.threshold:
            self.clocks[key] = _Clock()
            return "busy"
        if clock.idle_since is None:
            clock.idle_since = now
        idle_for = now - clock.idle_since
        if clock.warned_at is None:
            if idle_for >= policy.warn_at:
                clock.warned_at = now
                return "warn"
            return "idle"
        warned_for = now - clock.warned_at
        if idle_for >= policy.seconds and warned_for >= policy.warn_minutes * 60:
            return "cull"
        return "idle"

    def warned(self, key: ServerKey) -> float | None:
        """When this server's user was warned, if a warning is out."""
        clock = self.clocks.get(key)
        return clock.warned_at if clock else None

    def keep(self, key: ServerKey, now: float) -> bool:
        """The user answered a warning with "keep running": the clock starts again, once per
        warning (a second answer to the same warning changes nothing)."""
        clock = self.clocks.get(key)
        if clock is None or clock.warned_at is None:
            return False
        self.clocks[key] = _Clock(idle_since=now)
        return True

    def forget_except(self, live: set[ServerKey]) -> None:
        """Drop the clocks of servers that stopped (a later server starts from zero)."""
        for key in set(self.clocks) - live:
            del self.clocks[key]
