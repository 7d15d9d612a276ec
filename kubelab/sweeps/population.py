"""Population based training, the pure part: which search spaces it can perturb, how a member's
hyperparameters are explored, and how one generation's results become the next generation.

NNI's PBTTuner (Jaderberg et al., 2017): `population_size` members train for one generation
each; then the bottom `fraction` of them copy the checkpoint and hyperparameters of a member of
the top `fraction` (exploit) and change each hyperparameter (explore): with
`resample_probability` it is drawn from the search space again, else a number is multiplied by
one of `factors` and kept inside its range (a choice keeps its value). The rest go on from their
own checkpoint with their own hyperparameters. Standard library only: the Optuna side is
`pbt_tuner.py`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubelab.errors import FieldError
from kubelab.sweeps.space import NORMAL_TYPES, Parameter, Scalar, SearchSpace

DEFAULTS: dict[str, Any] = {
    "population_size": 10,
    "factors": (1.2, 0.8),
    "resample_probability": 0.25,
    "fraction": 0.2,
    "steps_per_generation": None,
}
NUMERIC = ("randint", "uniform", "quniform", "loguniform", "qloguniform", *NORMAL_TYPES)


@dataclass(frozen=True)
class Settings:
    """A PBT sweep's arguments (the tuner's args with NNI's defaults)."""

    population_size: int = DEFAULTS["population_size"]
    factors: tuple[float, ...] = DEFAULTS["factors"]
    resample_probability: float = DEFAULTS["resample_probability"]
    fraction: float = DEFAULTS["fraction"]
    steps_per_generation: int | None = None

    @classmethod
    def of(cls, kwargs: Mapping[str, Any]) -> Settings:
        known = {k: kwargs[k] for k in DEFAULTS if k in kwargs}
        if "factors" in known:
            known["factors"] = tuple(float(f) for f in known["factors"])
        return cls(**known)

    @property
    def replaced(self) -> int:
        """How many members a generation replaces (and how many it copies from): at least one."""
        return max(1, int(self.population_size * self.fraction))


@dataclass(frozen=True)
class Member:
    """One member's trial in a finished generation: its result and where its checkpoint is."""

    member: int
    number: int  # the trial
    value: float | None  # None: it failed, was pruned or reported nothing
    params: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    """What one member of the next generation runs: its parameters and whose checkpoint it copies."""

    member: int
    parent: int  # the trial it continues (its own previous trial unless exploited)
    params: dict[str, Any]
    exploited: bool


class PopulationStuck(Exception):
    """The next generation cannot be planned; the message says why (the sweep ends Failed)."""


# -- what PBT can search -----------------------------------------------------------------------
def perturbable(tuner: str, param: Parameter, space: SearchSpace) -> str | None:
    """A parameter PBT cannot explore: one inside or holding a nested choice."""
    if not param.nested and "/" not in param.key:
        return None
    return (
        f"{tuner} cannot perturb '{param.name}': nested choices make parameters come and go between "
        "a member and the one it copies; use flat parameters (choice of plain values, or numbers)"
    )


def space_problems(space: SearchSpace, root: str) -> list[FieldError]:
    """PBT explores by perturbing numbers: a space of choices alone gives it nothing to perturb."""
    if any(p.type in NUMERIC for p in space.walk()) or not len(space):
        return []
    return [
        FieldError(
            root,
            "pbt perturbs numeric parameters by its factors, and this space has only choices; "
            "add a numeric parameter (uniform, loguniform, randint...) or use the evolution tuner",
        )
    ]


# -- one generation to the next -----------------------------------------------------------------
def next_generation(
    members: list[Member],
    settings: Settings,
    space: SearchSpace,
    direction: str,
    rng: random.Random,
) -> list[Plan]:
    """The plans of the next generation, one per member of this one, in member order."""
    scored = [m for m in members if m.value is not None]
    if not scored:
        raise PopulationStuck(
            "no member of the generation finished with a result, so PBT has no member to copy"
        )
    sign = 1 if direction == "minimize" else -1
    ranked = sorted(scored, key=lambda m: (sign * (m.value or 0.0), m.member))
    count = settings.replaced
    top = ranked[:count]
    bottom = {m.member for m in ranked[-count:] if m not in top}
    bottom |= {m.member for m in members if m.value is None}
    plans = []
    for member in sorted(members, key=lambda m: m.member):
        if member.member in bottom:
            parent = rng.choice(top)
            params = explore(parent.params, space, settings, rng)
            plans.append(Plan(member.member, parent.number, params, exploited=True))
        else:
            plans.append(Plan(member.member, member.number, dict(member.params), exploited=False))
    return plans


def explore(
    params: Mapping[str, Any], space: SearchSpace, settings: Settings, rng: random.Random
) -> dict[str, Any]:
    """A perturbed copy of `params`: each one resampled or (numbers) scaled by a factor."""
    explored = dict(params)
    for param in space.params:
        if rng.random() < settings.resample_probability:
            explored[param.name] = sample(param, rng)
        elif param.type in NUMERIC and isinstance(params.get(param.name), (int, float)):
            explored[param.name] = scale(param, float(params[param.name]), rng.choice(settings.factors))
    return explored


def scale(param: Parameter, value: float, factor: float) -> Scalar:
    """`value * factor`, kept inside the parameter's range and on its grid (q, whole numbers)."""
    x = value * factor
    if param.type == "randint":
        return int(min(max(round(x), int(param.low)), int(param.high) - 1))
    if not param.unbounded:
        x = min(max(x, float(param.low)), float(param.high))
    return param.quantize(x)


def sample(param: Parameter, rng: random.Random) -> Scalar:
    """A fresh draw from the parameter's own distribution (NNI's meaning of each type)."""
    kind = param.type
    if kind == "choice":
        value: Scalar = rng.choice(param.options).value
        return value
    if kind == "randint":
        return rng.randrange(int(param.low), int(param.high))
    draws: dict[str, Callable[[], float]] = {
        "uniform": lambda: rng.uniform(param.low, param.high),
        "quniform": lambda: rng.uniform(param.low, param.high),
        "loguniform": lambda: math.exp(rng.uniform(math.log(param.low), math.log(param.high))),
        "qloguniform": lambda: math.exp(rng.uniform(math.log(param.low), math.log(param.high))),
        "normal": lambda: rng.gauss(param.mu, param.sigma),
        "qnormal": lambda: rng.gauss(param.mu, param.sigma),
        "lognormal": lambda: math.exp(rng.gauss(param.mu, param.sigma)),
        "qlognormal": lambda: math.exp(rng.gauss(param.mu, param.sigma)),
    }
    return param.quantize(draws[kind]())


def member_env(lineage: Mapping[str, Any], settings: Settings) -> dict[str, str]:
    """What a member's trial is told: its generation, the step it goes on from, where to stop."""
    start = int(lineage.get("start_step") or 0)
    env = {"KUBELAB_PBT_GENERATION": str(lineage["generation"]), "KUBELAB_START_STEP": str(start)}
    if settings.steps_per_generation is not None:
        env["KUBELAB_STOP_STEP"] = str(start + settings.steps_per_generation)
    return env
