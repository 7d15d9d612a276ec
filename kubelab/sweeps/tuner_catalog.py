"""Which tuners exist, what arguments they take and which parameters each can search.

Pure (no Optuna import) so a sweep spec is validated cheaply; `kubelab.sweeps.tuners`
turns a `TunerChoice` into an Optuna sampler.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.sweeps.argument_schemas import OPTIMIZE_MODE, SEED, Arg, ArgSchema, check_args, split_name
from kubelab.sweeps.space import MAX_GRID_VALUES, Parameter, SearchSpace

_STARTUP = Arg("n_startup_trials", "int", minimum=0)
_STARTUP_ALIASES = {"startup_trials": "n_startup_trials"}

SCHEMAS: dict[str, ArgSchema] = {
    "tpe": ArgSchema(
        {
            "optimize_mode": OPTIMIZE_MODE,
            "seed": SEED,
            "n_startup_trials": _STARTUP,
            "n_ei_candidates": Arg("n_ei_candidates", "int", minimum=1),
            "prior_weight": Arg("prior_weight", "float", above=0),
            "consider_endpoints": Arg("consider_endpoints", "bool"),
            "multivariate": Arg("multivariate", "bool"),
            "group": Arg("group", "bool"),
            "constant_liar": Arg("constant_liar", "bool"),
            # NNI's liar kinds all mean "assume running trials did badly"; Optuna has one such liar.
            "constant_liar_type": Arg(
                "constant_liar", "choice", choices=("min", "max", "mean"), convert=lambda _: True
            ),
        },
        {**_STARTUP_ALIASES, "n_startup_jobs": "n_startup_trials"},
        {
            "linear_forgetting": "NNI's linear_forgetting has no Optuna equivalent "
            "(Optuna's TPE weighs old trials by its own rule)",
            "gamma": "NNI's gamma is a fraction, Optuna's a function; it cannot be set from a spec",
        },
    ),
    "random": ArgSchema({"optimize_mode": OPTIMIZE_MODE, "seed": SEED}),
    "grid": ArgSchema({"optimize_mode": OPTIMIZE_MODE, "seed": SEED}),
    "bruteforce": ArgSchema({"optimize_mode": OPTIMIZE_MODE, "seed": SEED}),
    "batch": ArgSchema({"optimize_mode": OPTIMIZE_MODE}),
    "evolution": ArgSchema(
        {
            "optimize_mode": OPTIMIZE_MODE,
            "seed": SEED,
            "population_size": Arg("population_size", "int", minimum=2),
            "mutation_prob": Arg("mutation_prob", "float", minimum=0, maximum=1),
            "crossover_prob": Arg("crossover_prob", "float", minimum=0, maximum=1),
            "swapping_prob": Arg("swapping_prob", "float", minimum=0, maximum=1),
        }
    ),
    "cmaes": ArgSchema(
        {
            "optimize_mode": OPTIMIZE_MODE,
            "seed": SEED,
            "n_startup_trials": _STARTUP,
            "sigma0": Arg("sigma0", "float", above=0),
            "popsize": Arg("popsize", "int", minimum=1),
            "use_separable_cma": Arg("use_separable_cma", "bool"),
            "with_margin": Arg("with_margin", "bool"),
            "lr_adapt": Arg("lr_adapt", "bool"),
        },
        {**_STARTUP_ALIASES, "population_size": "popsize"},
    ),
    "gp": ArgSchema(
        {
            "optimize_mode": OPTIMIZE_MODE,
            "seed": SEED,
            "n_startup_trials": _STARTUP,
            "deterministic_objective": Arg("deterministic_objective", "bool"),
        },
        {**_STARTUP_ALIASES, "cold_start_num": "n_startup_trials"},
        {
            name: f"NNI's GP tuner argument '{name}' has no equivalent in Optuna's GPSampler "
            "(it chooses its acquisition function itself)"
            for name in (
                "utility",
                "kappa",
                "xi",
                "nu",
                "alpha",
                "selection_num_warm_up",
                "selection_num_starting_points",
            )
        },
    ),
    "qmc": ArgSchema(
        {
            "optimize_mode": OPTIMIZE_MODE,
            "seed": SEED,
            "qmc_type": Arg("qmc_type", "choice", choices=("sobol", "halton")),
            "scramble": Arg("scramble", "bool"),
        }
    ),
    "anneal": ArgSchema(
        {
            "optimize_mode": OPTIMIZE_MODE,
            "seed": SEED,
            "n_startup_trials": _STARTUP,
            "shrink_coef": Arg("shrink_coef", "float", above=0),
            "avg_best_idx": Arg("avg_best_idx", "float", minimum=1),
        },
        _STARTUP_ALIASES,
    ),
}
TUNERS = tuple(SCHEMAS)
# Packages a tuner's Optuna sampler needs beyond Optuna itself.
REQUIREMENTS = {"gp": ("scipy", "torch"), "qmc": ("scipy",), "cmaes": ("cmaes",)}
# CmaEsSampler refuses these argument pairs in its constructor; refused here, before any write.
CMAES_CONFLICTS = (
    ("with_margin", "use_separable_cma"),
    ("lr_adapt", "use_separable_cma"),
    ("lr_adapt", "with_margin"),
)

# Names users bring from NNI, Katib and Polyaxon, with the arguments they imply.
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "gridsearch": ("grid", {}),
    "exhaustive": ("bruteforce", {}),
    "batchtuner": ("batch", {}),
    "mapping": ("batch", {}),
    "randomsearch": ("random", {}),
    "gptuner": ("gp", {}),
    "bayesianoptimization": ("gp", {}),
    "bayes": ("gp", {}),
    "cma-es": ("cmaes", {}),
    "nsga2": ("evolution", {}),
    "nsgaii": ("evolution", {}),
    "sobol": ("qmc", {"qmc_type": "sobol"}),
    "halton": ("qmc", {"qmc_type": "halton"}),
    "multivariate-tpe": ("tpe", {"multivariate": True}),
}
REFUSED = {
    "hyperband": "Hyperband is early stopping here: use tuner 'random' with early_stopping 'hyperband'",
    "bohb": "BOHB is TPE plus Hyperband here: use tuner 'tpe' with early_stopping 'hyperband'",
    "smac": "SMAC is not available; 'tpe' or 'gp' are the closest model-based tuners",
    "metistuner": "Metis is not available; 'gp' is the closest (Gaussian-process) tuner",
    "pbttuner": "population based training changes parameters during a trial; it is not supported",
    "ppotuner": "the PPO tuner is for neural architecture search, which is not supported",
    "networkmorphism": "network morphism is neural architecture search, which is not supported",
    "dngotuner": "DNGO is not available; 'gp' is the closest tuner",
    "enas": "neural architecture search is not supported",
    "darts": "neural architecture search is not supported",
}


@dataclass(frozen=True)
class TunerChoice:
    """A validated tuner: its name, the canonical args, Optuna kwargs and the direction it implies."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    kwargs: dict[str, Any] = field(default_factory=dict)
    direction: str | None = None

    @property
    def seed(self) -> int | None:
        return self.kwargs.get("seed")

    @property
    def exhaustive(self) -> bool:
        return self.name in ("grid", "bruteforce", "batch")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args)}

    def unavailable(self, path: str = "tuner.name") -> FieldError | None:
        """The error naming the packages this tuner needs and that are not installed, or None."""
        missing = [m for m in REQUIREMENTS.get(self.name, ()) if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        reason = f"{self.name} needs the Python packages {', '.join(missing)}; install them first"
        return FieldError(path, reason)

    def check(self, space: SearchSpace, root: str = "space") -> list[FieldError]:
        """Why this tuner cannot search `space`, one sentence per parameter (empty when it can)."""
        if self.name == "batch":
            return []
        if not len(space):
            return [FieldError(root, f"is empty; {self.name} needs at least one parameter to search")]
        problems = []
        for param in space.walk():
            reason = refusal(self.name, param)
            if reason:
                problems.append(FieldError(param.path, reason))
            elif self.name in ("grid", "bruteforce") and space.nested and param.grid_values() is None:
                problems.append(
                    FieldError(
                        param.path,
                        (
                            f"{self.name} cannot divide '{param.name}' ever finer beside nested choices: "
                            f"{param.type} has no finite list of values; use choice or quniform"
                        ),
                    )
                )
        return problems


def refusal(tuner: str, param: Parameter) -> str | None:
    """The sentence saying why `tuner` cannot search `param`, or None."""
    kind = param.type
    if tuner in ("grid", "bruteforce") and param.grid_values() is None and "/" in param.key:
        # Flat spaces get NNI's ever finer grid (progressive_grid); nested ones must enumerate.
        return (
            f"{tuner} cannot search '{param.name}' inside a nested choice: {kind} has no finite "
            f"list of values (at most {MAX_GRID_VALUES}); use choice or quniform there"
        )
    if tuner == "cmaes" and kind == "choice":
        return (
            f"cmaes cannot search '{param.name}': choice is categorical and CMA-ES searches numbers only "
            "(Optuna would pick it at random, unguided); use tpe, or randint for ordered options"
        )
    if tuner in ("gp", "qmc") and param.nested:
        return (
            f"{tuner} cannot search '{param.name}': its nested options make parameters conditional, and "
            f"{tuner} models only parameters present in every trial; use tpe, evolution or anneal"
        )
    return None


def resolve_tuner(value: Any, path: str = "tuner") -> TunerChoice:
    """`"tpe"` or `{name, args}` → TunerChoice, or ValidationError naming each bad field."""
    choice, errors = check_tuner(value, path)
    if errors:
        raise ValidationError("invalid tuner", errors)
    return choice


def check_tuner(value: Any, path: str = "tuner") -> tuple[TunerChoice, list[FieldError]]:
    raw_name, args, errors = split_name(value, path, "tpe")
    name_path = f"{path}.name" if isinstance(value, dict) else path
    key = str(raw_name).strip().lower().replace("_", "")
    implied: dict[str, Any] = {}
    if key in ALIASES:
        key, implied = ALIASES[key]
    if key in REFUSED:
        return TunerChoice("tpe"), [*errors, FieldError(name_path, REFUSED[key])]
    if key not in SCHEMAS:
        hint = did_you_mean(str(raw_name).lower(), list(SCHEMAS) + list(ALIASES))
        reason = f"unknown tuner {raw_name!r}{hint} (known: {', '.join(TUNERS)})"
        return TunerChoice("tpe"), [*errors, FieldError(name_path, reason)]
    merged = dict(implied)
    if isinstance(args, dict):
        merged.update(_flatten_tpe_args(args))
    elif args is not None:
        merged = args
    canonical, kwargs, arg_errors = check_args(merged, SCHEMAS[key], f"{path}.args", key)
    errors += arg_errors
    if kwargs.get("group") and not kwargs.get("multivariate"):
        errors.append(FieldError(f"{path}.args.group", "needs multivariate: true"))
    if key == "cmaes":
        for one, other in CMAES_CONFLICTS:
            if kwargs.get(one) and kwargs.get(other):
                errors.append(FieldError(f"{path}.args.{one}", f"cannot be combined with {other}"))
    direction = kwargs.pop("__direction__", None)
    return TunerChoice(key, canonical, kwargs, direction), errors


def _flatten_tpe_args(args: dict[str, Any]) -> dict[str, Any]:
    """NNI nests TPE's arguments under `tpe_args`; accept them at either level."""
    nested = args.get("tpe_args")
    if not isinstance(nested, dict):
        return dict(args)
    flat = {k: v for k, v in args.items() if k != "tpe_args"}
    flat.update(nested)
    return flat


def check_batch(value: Any, path: str = "batch") -> tuple[list[dict[str, Any]], list[FieldError]]:
    """The batch tuner's configurations: a non-empty list of mappings of names to plain values."""
    if not isinstance(value, list) or not value:
        return [], [
            FieldError(path, "must be a non-empty list of configurations (mappings of names to values)")
        ]
    configs: list[dict[str, Any]] = []
    errors: list[FieldError] = []
    for index, config in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(config, dict) or not config:
            errors.append(FieldError(where, "must be a non-empty mapping of parameter names to values"))
            continue
        for name, item in config.items():
            if not isinstance(name, str) or not name:
                errors.append(FieldError(f"{where}.{name}", "parameter names must be non-empty strings"))
            elif not _plain_value(item):
                errors.append(
                    FieldError(
                        f"{where}.{name}",
                        f"must be a number, string, boolean or null, not {type(item).__name__}",
                    )
                )
        configs.append(dict(config))
    return configs, errors


def _plain_value(value: Any) -> bool:
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    return value is None or isinstance(value, (str, int, bool))
