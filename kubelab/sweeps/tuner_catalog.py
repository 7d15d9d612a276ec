"""The tuners: one registry entry each (`TUNER_KINDS`) holds its arguments, what it cannot
search, the packages it needs and how its Optuna sampler is built.

Pure (no Optuna import until a sampler is built) so a sweep spec is validated cheaply;
`kubelab.sweeps.tuners.Tuner` asks the entry for its sampler. Adding a tuner is one entry
here, its test and its line in docs/sweeps.md (docs/architecture.md, "Add a tuner").
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.sweeps.argument_schemas import OPTIMIZE_MODE, SEED, Arg, ArgSchema, check_args, split_name
from kubelab.sweeps.population import perturbable, space_problems
from kubelab.sweeps.space import MAX_GRID_VALUES, Parameter, SearchSpace

_STARTUP = Arg("n_startup_trials", "int", minimum=0)
_STARTUP_ALIASES = {"startup_trials": "n_startup_trials"}

Sampler = Any  # an optuna.samplers.BaseSampler; typed loosely so this module needs no Optuna
Refuses = Callable[[str, Parameter, SearchSpace], "str | None"]


def optuna_sampler(name: str) -> Callable[[int, dict[str, Any]], Sampler]:
    """Build `optuna.samplers.<name>(seed=..., **kwargs)` (Optuna imported only then)."""

    def build(seed: int, kwargs: dict[str, Any]) -> Sampler:
        import optuna

        return getattr(optuna.samplers, name)(seed=seed, **kwargs)

    return build


def _exhaustive(seed: int, kwargs: dict[str, Any]) -> Sampler:
    # BruteForceSampler walks conditional (nested) spaces as a tree; GridSampler would
    # enumerate inactive parameters too and run the same configuration several times.
    from kubelab.sweeps.exhaustive import ExhaustiveSampler

    return ExhaustiveSampler(seed=seed)


def _anneal(seed: int, kwargs: dict[str, Any]) -> Sampler:
    from kubelab.sweeps.anneal import AnnealSampler

    return AnnealSampler(seed=seed, **kwargs)


def _first_generation(seed: int, kwargs: dict[str, Any]) -> Sampler:
    """PBT's first generation is drawn at random; its arguments are the population's (pbt_tuner.py)."""
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def searches_all(tuner: str, param: Parameter, space: SearchSpace) -> str | None:
    return None


def enumerable(tuner: str, param: Parameter, space: SearchSpace) -> str | None:
    """Grids: nested choices must list their values (flat spaces get NNI's ever finer grid)."""
    if param.grid_values() is not None or not space.nested:
        return None
    if "/" in param.key:
        return (
            f"{tuner} cannot search '{param.name}' inside a nested choice: {param.type} has no finite "
            f"list of values (at most {MAX_GRID_VALUES}); use choice or quniform there"
        )
    return (
        f"{tuner} cannot divide '{param.name}' ever finer beside nested choices: "
        f"{param.type} has no finite list of values; use choice or quniform"
    )


def numbers_only(tuner: str, param: Parameter, space: SearchSpace) -> str | None:
    if param.type != "choice":
        return None
    return (
        f"{tuner} cannot search '{param.name}': choice is categorical and CMA-ES searches numbers only "
        "(Optuna would pick it at random, unguided); use tpe, or randint for ordered options"
    )


def unconditional(tuner: str, param: Parameter, space: SearchSpace) -> str | None:
    if not param.nested:
        return None
    return (
        f"{tuner} cannot search '{param.name}': its nested options make parameters conditional, and "
        f"{tuner} models only parameters present in every trial; use tpe, evolution or anneal"
    )


@dataclass(frozen=True)
class TunerKind:
    """One tuner: everything kubelab knows of it, in one place.

    `walks` says how trials are chosen: by the sampler, by walking the space's grid (the
    sweep ends when it is exhausted), from the listed `batch` configurations, or generation by
    generation from a population's checkpoints (`pbt_tuner.py`). A reopened
    study's sampler is reseeded with `seed + trials so far` (unless `reseed` is False), so a
    resumed sweep does not replay its first trials' random numbers.
    """

    args: ArgSchema
    build: Callable[[int, dict[str, Any]], Sampler]
    refuses: Refuses = searches_all
    requires: tuple[str, ...] = ()  # packages its sampler needs beyond Optuna
    conflicts: tuple[tuple[str, str], ...] = ()  # argument pairs its sampler refuses together
    walks: Literal["sampler", "grid", "batch", "population"] = "sampler"
    reseed: bool = True
    offered: bool = True  # in the sidebar's "Run as sweep" dialog

    def sampler(self, seed: int, kwargs: dict[str, Any], existing_trials: int = 0) -> Sampler:
        """The Optuna sampler (imports Optuna), seeded for a study with `existing_trials`."""
        import warnings

        import optuna

        kwargs = {k: v for k, v in kwargs.items() if k != "seed"}
        if self.reseed:
            seed = (seed + existing_trials) % 2**32
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return self.build(seed, kwargs)


_PLAIN = ArgSchema({"optimize_mode": OPTIMIZE_MODE, "seed": SEED})
_RANDOM = optuna_sampler("RandomSampler")

TUNER_KINDS: dict[str, TunerKind] = {
    "tpe": TunerKind(
        ArgSchema(
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
        optuna_sampler("TPESampler"),
    ),
    "random": TunerKind(_PLAIN, _RANDOM),
    "grid": TunerKind(_PLAIN, _exhaustive, enumerable, walks="grid"),
    "bruteforce": TunerKind(_PLAIN, _exhaustive, enumerable, walks="grid", offered=False),
    # batch: every trial is enqueued with every value fixed; the sampler never chooses
    "batch": TunerKind(ArgSchema({"optimize_mode": OPTIMIZE_MODE}), _RANDOM, walks="batch", offered=False),
    "evolution": TunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "seed": SEED,
                "population_size": Arg("population_size", "int", minimum=2),
                "mutation_prob": Arg("mutation_prob", "float", minimum=0, maximum=1),
                "crossover_prob": Arg("crossover_prob", "float", minimum=0, maximum=1),
                "swapping_prob": Arg("swapping_prob", "float", minimum=0, maximum=1),
            }
        ),
        optuna_sampler("NSGAIISampler"),
    ),
    "cmaes": TunerKind(
        ArgSchema(
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
        optuna_sampler("CmaEsSampler"),
        numbers_only,
        requires=("cmaes",),
        # CmaEsSampler refuses these pairs in its constructor; refused here, before any write.
        conflicts=(
            ("with_margin", "use_separable_cma"),
            ("lr_adapt", "use_separable_cma"),
            ("lr_adapt", "with_margin"),
        ),
    ),
    "gp": TunerKind(
        ArgSchema(
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
        optuna_sampler("GPSampler"),
        unconditional,
        requires=("scipy", "torch"),
    ),
    "qmc": TunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "seed": SEED,
                "qmc_type": Arg("qmc_type", "choice", choices=("sobol", "halton")),
                "scramble": Arg("scramble", "bool"),
            }
        ),
        optuna_sampler("QMCSampler"),
        unconditional,
        requires=("scipy",),
        reseed=False,  # its position in the sequence is stored in the study
    ),
    "anneal": TunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "seed": SEED,
                "n_startup_trials": _STARTUP,
                "shrink_coef": Arg("shrink_coef", "float", above=0),
                "avg_best_idx": Arg("avg_best_idx", "float", minimum=1),
            },
            _STARTUP_ALIASES,
        ),
        _anneal,
    ),
    # Population based training: generations of members that go on from checkpoints (population.py)
    "pbt": TunerKind(
        ArgSchema(
            {
                "optimize_mode": OPTIMIZE_MODE,
                "seed": SEED,
                "population_size": Arg("population_size", "int", minimum=2),
                "factors": Arg("factors", "numbers", above=0),
                "resample_probability": Arg("resample_probability", "float", minimum=0, maximum=1),
                "fraction": Arg("fraction", "float", above=0, maximum=0.5),
                "steps_per_generation": Arg("steps_per_generation", "int", minimum=1),
                # NNI's folder for every checkpoint; kubelab keeps each member's in its own run
                "all_checkpoint_dir": Arg("all_checkpoint_dir", "text"),
            },
            {"n_population": "population_size", "truncation_threshold": "fraction"},  # Katib's names
        ),
        _first_generation,
        perturbable,
        walks="population",
        offered=False,
    ),
}
TUNERS = tuple(TUNER_KINDS)

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
    "pbttuner": ("pbt", {}),
    "populationbasedtraining": ("pbt", {}),
}
REFUSED = {
    "hyperband": "Hyperband is early stopping here: use tuner 'random' with early_stopping 'hyperband'",
    "bohb": "BOHB is TPE plus Hyperband here: use tuner 'tpe' with early_stopping 'hyperband'",
    "smac": "SMAC is not available; 'tpe' or 'gp' are the closest model-based tuners",
    "metistuner": "Metis is not available; 'gp' is the closest (Gaussian-process) tuner",
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
    def kind(self) -> TunerKind:
        return TUNER_KINDS[self.name]

    @property
    def exhaustive(self) -> bool:
        """True when it hands out a finite list of configurations (a grid or a batch)."""
        return self.kind.walks in ("grid", "batch")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "args": dict(self.args)}

    def unavailable(self, path: str = "tuner.name") -> FieldError | None:
        """The error naming the packages this tuner needs and that are not installed, or None."""
        missing = [m for m in self.kind.requires if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        reason = f"{self.name} needs the Python packages {', '.join(missing)}; install them first"
        return FieldError(path, reason)

    def check(self, space: SearchSpace, root: str = "space") -> list[FieldError]:
        """Why this tuner cannot search `space`, one sentence per parameter (empty when it can)."""
        if self.kind.walks == "batch":
            return []
        if not len(space):
            return [FieldError(root, f"is empty; {self.name} needs at least one parameter to search")]
        problems = []
        for param in space.walk():
            reason = self.kind.refuses(self.name, param, space)
            if reason:
                problems.append(FieldError(param.path, reason))
        if self.kind.walks == "population" and not problems:
            problems += space_problems(space, root)
        return problems


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
    if key not in TUNER_KINDS:
        hint = did_you_mean(str(raw_name).lower(), list(TUNER_KINDS) + list(ALIASES))
        reason = f"unknown tuner {raw_name!r}{hint} (known: {', '.join(TUNERS)})"
        return TunerChoice("tpe"), [*errors, FieldError(name_path, reason)]
    merged = dict(implied)
    if isinstance(args, dict):
        merged.update(_flatten_tpe_args(args))
    elif args is not None:
        merged = args
    kind = TUNER_KINDS[key]
    canonical, kwargs, arg_errors = check_args(merged, kind.args, f"{path}.args", key)
    errors += arg_errors
    if kwargs.get("group") and not kwargs.get("multivariate"):
        errors.append(FieldError(f"{path}.args.group", "needs multivariate: true"))
    for one, other in kind.conflicts:
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
