"""Early stopping: which trials to stop from their intermediate metrics (Optuna pruners).

`median` (MedianPruner), `hyperband` (HyperbandPruner), `asha` (SuccessiveHalvingPruner)
and `none`. NNI's assessor names are accepted: `Medianstop` is `median` (its `start_step`
is `n_warmup_steps`); `Curvefitting` is refused, since Optuna has no curve-fitting pruner.
The resource Optuna's Hyperband and ASHA count is the `step` a trial reports at.
Validation is pure; `PrunerChoice.build()` imports Optuna.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.sweeps.argument_schemas import OPTIMIZE_MODE, Arg, ArgSchema, check_args, split_name


@dataclass(frozen=True)
class PrunerKind:
    """One kind of early stopping: its arguments and the Optuna pruner it builds.

    `bounded` names the resource argument that must be a number, not "auto", for the
    pruner to bootstrap (Optuna bootstraps from a fixed resource).
    """

    args: ArgSchema
    optuna_class: str
    bounded: str | None = None


PRUNER_KINDS: dict[str, PrunerKind] = {
    "none": PrunerKind(ArgSchema({}), "NopPruner"),
    "median": PrunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "n_startup_trials": Arg("n_startup_trials", "int", minimum=0),
                "n_warmup_steps": Arg("n_warmup_steps", "int", minimum=0),
                "interval_steps": Arg("interval_steps", "int", minimum=1),
                "n_min_trials": Arg("n_min_trials", "int", minimum=1),
            },
            {"start_step": "n_warmup_steps", "startup_trials": "n_startup_trials"},
        ),
        "MedianPruner",
    ),
    "hyperband": PrunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "min_resource": Arg("min_resource", "int", minimum=1),
                "max_resource": Arg("max_resource", "int", minimum=1, auto=True),
                "reduction_factor": Arg("reduction_factor", "int", minimum=2),
                "bootstrap_count": Arg("bootstrap_count", "int", minimum=0),
            },
            {
                "R": "max_resource",
                "eta": "reduction_factor",
                "max_budget": "max_resource",
                "min_budget": "min_resource",
            },
            {"exec_mode": "NNI's exec_mode has no meaning here: trials run in parallel, up to concurrency"},
        ),
        "HyperbandPruner",
        bounded="max_resource",
    ),
    "asha": PrunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "min_resource": Arg("min_resource", "int", minimum=1, auto=True),
                "reduction_factor": Arg("reduction_factor", "int", minimum=2),
                "min_early_stopping_rate": Arg("min_early_stopping_rate", "int", minimum=0),
                "bootstrap_count": Arg("bootstrap_count", "int", minimum=0),
            },
            {"eta": "reduction_factor"},
        ),
        "SuccessiveHalvingPruner",
        bounded="min_resource",
    ),
}
PRUNERS = tuple(PRUNER_KINDS)
ALIASES = {
    "medianstop": "median",
    "medianstopping": "median",
    "successivehalving": "asha",
    "nop": "none",
    "off": "none",
}
REFUSED = {
    "curvefitting": "Curvefitting has no Optuna equivalent; use median, asha or hyperband",
}


@dataclass(frozen=True)
class PrunerChoice:
    name: str = "none"
    args: dict[str, Any] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    direction: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args)}

    def build(self) -> Any:
        """The Optuna pruner (imports Optuna)."""
        import optuna

        return getattr(optuna.pruners, PRUNER_KINDS[self.name].optuna_class)(**self.kwargs)


def resolve_pruner(value: Any, path: str = "early_stopping") -> PrunerChoice:
    """`"median"` or `{name, args}` (or None) → PrunerChoice, or ValidationError."""
    choice, errors = check_pruner(value, path)
    if errors:
        raise ValidationError("invalid early stopping", errors)
    return choice


def check_pruner(value: Any, path: str = "early_stopping") -> tuple[PrunerChoice, list[FieldError]]:
    if isinstance(value, PrunerChoice):
        return value, []
    raw_name, args, errors = split_name(value, path, "none")
    name_path = f"{path}.name" if isinstance(value, dict) else path
    key = str(raw_name).strip().lower().replace("_", "")
    key = ALIASES.get(key, key)
    if key in REFUSED:
        return PrunerChoice(), [*errors, FieldError(name_path, REFUSED[key])]
    if key not in PRUNER_KINDS:
        hint = did_you_mean(str(raw_name).lower(), list(PRUNER_KINDS) + list(ALIASES))
        reason = f"unknown early stopping {raw_name!r}{hint} (known: {', '.join(PRUNERS)})"
        return PrunerChoice(), [*errors, FieldError(name_path, reason)]
    canonical, kwargs, arg_errors = check_args(args, PRUNER_KINDS[key].args, f"{path}.args", key)
    errors += arg_errors
    direction = kwargs.pop("__direction__", None)
    # Optuna bootstraps from a fixed resource: "auto" (the default) cannot be combined with it.
    bounded = PRUNER_KINDS[key].bounded
    if bounded and (kwargs.get("bootstrap_count") or 0) > 0 and kwargs.get(bounded, "auto") == "auto":
        reason = f"needs {bounded} set to a number ({bounded} 'auto' cannot bootstrap)"
        errors.append(FieldError(f"{path}.args.bootstrap_count", reason))
    low, high = kwargs.get("min_resource"), kwargs.get("max_resource")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        errors.append(FieldError(f"{path}.args.min_resource", f"must not exceed max_resource ({high})"))
    return PrunerChoice(key, canonical, kwargs, direction), errors
