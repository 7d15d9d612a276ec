"""Polyaxon's hyperparameter search (v0 `hptuning`, v1 `matrix`) as kubelab sweep fields.

Parameters become NNI search-space entries: value lists (`values`/`choice`, `range`,
`linspace`, `logspace`, `geomspace`) are computed into `choice` options as Polyaxon
computes them (numpy's arange/linspace/logspace/geomspace); distributions keep their
meaning (`loguniform`/`qloguniform` draw `exp(uniform(low, high))`, so their bounds are
exponentiated). Algorithms map onto kubelab's tuners: grid, random, hyperband (random
search with Hyperband early stopping), bayes/bo (Gaussian process), hyperopt (tpe, rand,
anneal) and mapping (batch). What has no equivalent is refused by name.
"""

from __future__ import annotations

import math
from typing import Any

from kubelab.errors import FieldError

LISTS = ("range", "linspace", "logspace", "geomspace")
DISTRIBUTIONS = {  # Polyaxon kind -> (NNI type, argument names in order)
    "uniform": ("uniform", ("low", "high")),
    "quniform": ("quniform", ("low", "high", "q")),
    "loguniform": ("loguniform", ("low", "high")),
    "qloguniform": ("qloguniform", ("low", "high", "q")),
    "normal": ("normal", ("loc", "scale")),
    "qnormal": ("qnormal", ("loc", "scale", "q")),
    "lognormal": ("lognormal", ("loc", "scale")),
    "qlognormal": ("qlognormal", ("loc", "scale", "q")),
}
LIST_ARGS = {
    "range": ("start", "stop", "step"),
    "linspace": ("start", "stop", "num"),
    "logspace": ("start", "stop", "num", "base"),
    "geomspace": ("start", "stop", "num"),
}
V0_KINDS = ("values", "pvalues", *LISTS, *DISTRIBUTIONS)
V1_KINDS = ("choice", "pchoice", *LISTS, *DISTRIBUTIONS, "daterange", "datetimerange")
MAX_VALUES = 10_000


class Matrix:
    """Collects every problem; `errors` is empty when the conversion is complete."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    # -- parameters -----------------------------------------------------------------
    def space(self, params: Any, path: str, v1: bool) -> dict[str, Any]:
        if not isinstance(params, dict) or not params:
            self.fail(path, "must be a mapping of parameter names to their values or distribution")
            return {}
        space = {}
        for name, spec in params.items():
            converted = self.param(spec, f"{path}.{name}", v1)
            if converted is not None:
                space[str(name)] = converted
        return space

    def param(self, spec: Any, path: str, v1: bool) -> dict[str, Any] | None:
        if not isinstance(spec, dict):
            self.fail(
                path,
                "must be a mapping such as {kind: choice, value: [...]}"
                if v1
                else "must be a mapping such as {values: [...]}",
            )
            return None
        if v1:
            extra = [k for k in spec if k not in ("kind", "value")]
            for key in extra:
                self.fail(f"{path}.{key}", "unknown field (a v1 parameter has kind and value)")
            kind, value = spec.get("kind"), spec.get("value")
            known = V1_KINDS
        else:
            kinds = [k for k in spec if k in V0_KINDS]
            for key in spec:
                if key not in V0_KINDS:
                    self.fail(f"{path}.{key}", f"unknown kind (known: {', '.join(V0_KINDS)})")
            if len(kinds) != 1:
                self.fail(path, "give exactly one of " + ", ".join(V0_KINDS))
                return None
            kind, value = kinds[0], spec[kinds[0]]
            known = V0_KINDS
        if kind not in known:
            self.fail(f"{path}.kind" if v1 else path, f"unknown kind {kind!r} (known: {', '.join(known)})")
            return None
        if kind in ("values", "choice"):
            if not isinstance(value, list) or not value:
                self.fail(path, f"{kind} needs a non-empty list of values")
                return None
            return {"_type": "choice", "_value": value}
        if kind in ("pvalues", "pchoice"):
            self.fail(
                path,
                f"{kind} (weighted choice) has no equivalent: kubelab's tuners weigh options "
                "equally; use a plain choice",
            )
            return None
        if kind in ("daterange", "datetimerange"):
            self.fail(path, f"{kind} is not supported; list the dates with choice")
            return None
        if kind in LISTS:
            return self.values(kind, value, path)
        nni_type, names = DISTRIBUTIONS[kind]
        numbers = self.numbers(value, names, path, kind)
        if numbers is None:
            return None
        if kind in ("loguniform", "qloguniform"):  # Polyaxon draws exp(uniform(low, high))
            numbers = [math.exp(numbers[0]), math.exp(numbers[1]), *numbers[2:]]
        return {"_type": nni_type, "_value": numbers}

    def numbers(
        self,
        value: Any,
        names: tuple[str, ...],
        path: str,
        kind: str,
        defaults: dict[str, float] | None = None,
    ) -> list[float] | None:
        """`"a:b:c"`, `[a, b, c]` or `{name: value}` -> numbers in `names` order."""
        defaults = defaults or {}
        if isinstance(value, str):
            value = [v.strip() for v in value.split(":")]
        if isinstance(value, dict):
            unknown = [k for k in value if k not in names]
            for key in unknown:
                self.fail(f"{path}.{key}", f"unknown argument of {kind} (it takes {', '.join(names)})")
            value = [value.get(n, defaults.get(n)) for n in names]
        if not isinstance(value, list):
            self.fail(path, f"{kind} takes {':'.join(names)}, not {value!r}")
            return None
        value = value + [defaults[n] for n in names[len(value) :] if n in defaults]
        if len(value) != len(names):
            self.fail(path, f"{kind} takes {len(names)} numbers ({', '.join(names)}), not {len(value)}")
            return None
        result = []
        for name, item in zip(names, value, strict=True):
            try:
                number = float(item)
            except (TypeError, ValueError):
                self.fail(path, f"{kind}'s {name} must be a number, not {item!r}")
                return None
            result.append(int(number) if number.is_integer() and not isinstance(item, float) else number)
        return result

    def values(self, kind: str, value: Any, path: str) -> dict[str, Any] | None:
        numbers = self.numbers(value, LIST_ARGS[kind], path, kind, {"base": 10})
        if numbers is None:
            return None
        start, stop, third = numbers[0], numbers[1], numbers[2]
        if kind == "range":
            if third == 0 or (stop - start) / third > MAX_VALUES:
                self.fail(path, f"range {start}:{stop}:{third} must give 1 to {MAX_VALUES} values")
                return None
            count = max(0, math.ceil((stop - start) / third))
            values = [start + i * third for i in range(count)]
        else:
            num = int(third)
            if num != third or not 1 <= num <= MAX_VALUES:
                self.fail(path, f"{kind}'s num must be a whole number from 1 to {MAX_VALUES}, not {third}")
                return None
            step = (stop - start) / (num - 1) if num > 1 else 0.0
            points = [start + i * step for i in range(num)]
            if kind == "logspace":
                values = [numbers[3] ** p for p in points]
            elif kind == "geomspace":
                if start <= 0 or stop <= 0:
                    self.fail(path, "geomspace needs start and stop above 0")
                    return None
                ratio = (stop / start) ** (1 / (num - 1)) if num > 1 else 1.0
                values = [start * ratio**i for i in range(num)]
            else:
                values = points
        cleaned = list(dict.fromkeys(_tidy(v) for v in values))
        if not cleaned:
            self.fail(path, f"{kind} {value!r} gives no values")
            return None
        return {"_type": "choice", "_value": cleaned}

    # -- early stopping ---------------------------------------------------------------
    def stop_at(self, policies: Any, path: str, objective: dict[str, str | None]) -> float | None:
        """Polyaxon's metric early stopping on the objective -> `stop_at`.

        An objective without a metric takes the policy's (None when the policy names none,
        which the caller replaces with its default).
        """
        if policies in (None, []):
            return None
        if not isinstance(policies, list) or len(policies) != 1 or not isinstance(policies[0], dict):
            self.fail(path, "kubelab supports one early-stopping policy on the objective metric")
            return None
        policy, where = policies[0], f"{path}[0]"
        kind = policy.get("kind", "metric_early_stopping")
        if kind != "metric_early_stopping":
            self.fail(f"{where}.kind", f"{kind} is not supported (use max_failed_trials for failures)")
            return None
        for key in policy:
            if key not in ("kind", "metric", "value", "optimization", "policy"):
                self.fail(f"{where}.{key}", "unknown field")
        if policy.get("policy") is not None:
            self.fail(
                f"{where}.policy",
                "median/truncation/diff policies are not supported on a "
                "threshold; use a matrix with hyperband for trial early stopping",
            )
        metric = policy.get("metric")
        optimization = direction(policy.get("optimization", objective.get("direction")))
        if not objective.get("metric"):
            objective["metric"], objective["direction"] = metric, optimization
        if metric != objective["metric"] or optimization != objective["direction"]:
            self.fail(
                f"{where}.metric",
                f"early stopping must watch the objective "
                f"({objective['metric']}, {objective['direction']}), not {metric!r}",
            )
            return None
        value = policy.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(f"{where}.value", f"must be a number, not {value!r}")
            return None
        return float(value)


def hyperband_trials(max_iter: int, eta: int) -> int:
    """How many runs Polyaxon's Hyperband makes: every bracket's first rung."""
    s_max = int(math.floor(math.log(max_iter) / math.log(eta) + 1e-9))
    budget = (s_max + 1) * max_iter
    return sum(math.ceil(budget / max_iter / (s + 1) * eta**s) for s in range(s_max + 1))


def direction(value: Any) -> str:
    text = str(value or "minimize").lower()
    return {"min": "minimize", "max": "maximize"}.get(text, text)


def _tidy(value: float) -> int | float:
    """`0.30000000000000004` -> 0.3; whole floats stay floats (linspace gives floats)."""
    return float(f"{value:.12g}") if isinstance(value, float) else value


ALGORITHM_KEYS = {
    "grid": ("n_experiments",),
    "random": ("n_experiments", "seed"),
    "hyperband": ("max_iter", "eta", "resource", "metric", "resume", "seed"),
    "bayes": ("n_iterations", "n_initial_trials", "metric", "utility_function", "seed"),
    "hyperopt": ("algorithm", "n_experiments", "metric", "seed"),
    "mapping": ("values",),
}
HYPEROPT = {"tpe": "tpe", "rand": "random", "anneal": "anneal"}


def search(
    m: Matrix,
    algorithm: str,
    settings: dict[str, Any],
    path: str,
    sweep: dict[str, Any],
    spelled: dict[str, str] | None = None,
) -> None:
    """Fill `sweep` (tuner, early_stopping, objective, max_trials, trial params) for one algorithm.

    `settings` uses v0's names (v1's camelCase names are translated by the caller, which passes
    `spelled`, v0's name -> the file's own, so messages name the field the user wrote).
    """
    names = spelled or {}
    for key in settings:
        if key not in ALGORITHM_KEYS[algorithm]:
            m.fail(f"{path}.{names.get(key, key)}", f"unknown or unsupported {algorithm} setting")
    seed = settings.get("seed")
    args = {"seed": seed} if seed is not None else {}
    objective = sweep.setdefault("objective", {})

    def required(key: str) -> Any:
        value = settings.get(key)
        if value is None:
            m.fail(f"{path}.{names.get(key, key)}", f"is required for {algorithm}")
        return value

    def metric() -> None:
        spec = required("metric")
        if isinstance(spec, dict) and spec.get("name"):
            objective["metric"] = spec["name"]
            objective["direction"] = direction(spec.get("optimization"))
        elif spec is not None:
            m.fail(f"{path}.metric", "must be a mapping with name and optimization")

    if algorithm == "grid":
        sweep["tuner"] = {"name": "grid", "args": args}
        if settings.get("n_experiments") is not None:
            sweep["max_trials"] = settings["n_experiments"]
    elif algorithm == "random":
        sweep["tuner"] = {"name": "random", "args": args}
        sweep["max_trials"] = required("n_experiments")
    elif algorithm == "hyperopt":
        name = settings.get("algorithm", "tpe")
        if name not in HYPEROPT:
            m.fail(f"{path}.algorithm", f"must be tpe, rand or anneal, not {name!r}")
        sweep["tuner"] = {"name": HYPEROPT.get(name, "tpe"), "args": args}
        sweep["max_trials"] = required("n_experiments")
        if settings.get("metric") is not None:
            metric()
    elif algorithm == "mapping":
        sweep["tuner"] = {"name": "batch", "args": {}}
        sweep["batch"] = required("values")
    elif algorithm == "bayes":
        _bayes(m, settings, path, sweep, args, required)
        metric()
    elif algorithm == "hyperband":
        _hyperband(m, settings, path, sweep, args, required)
        metric()


def _bayes(
    m: Matrix, settings: dict[str, Any], path: str, sweep: dict[str, Any], args: dict[str, Any], required: Any
) -> None:
    """Gaussian-process search: Optuna's GPSampler (expected improvement, Matern 5/2 kernel)."""
    initial, iterations = required("n_initial_trials"), required("n_iterations")
    if isinstance(initial, int) and isinstance(iterations, int):
        sweep["max_trials"] = initial + iterations
        args["n_startup_trials"] = initial
    sweep["tuner"] = {"name": "gp", "args": args}
    utility = settings.get("utility_function") or {}
    where = f"{path}.utility_function"
    if not isinstance(utility, dict):
        m.fail(where, "must be a mapping")
        return
    for key, value in utility.items():
        if key == "acquisition_function":
            if str(value).lower() != "ei":
                m.fail(
                    f"{where}.{key}",
                    f"only ei (expected improvement, what Optuna's GP sampler "
                    f"uses) is available, not {value!r}",
                )
        elif key == "gaussian_process":
            for name, item in (value or {}).items():
                fits = (name == "kernel" and str(item).lower() == "matern") or (name == "nu" and item == 2.5)
                if not fits:
                    m.fail(
                        f"{where}.{key}.{name}",
                        "Optuna's GP sampler uses a Matern 5/2 kernel fitted "
                        "by itself; this setting has no equivalent",
                    )
        else:
            m.fail(f"{where}.{key}", "has no equivalent in Optuna's GP sampler")


def _hyperband(
    m: Matrix, settings: dict[str, Any], path: str, sweep: dict[str, Any], args: dict[str, Any], required: Any
) -> None:
    """Random search with Hyperband early stopping; each trial gets the largest budget."""
    max_iter, eta = required("max_iter"), required("eta")
    resource = required("resource")
    if settings.get("resume"):
        m.fail(
            f"{path}.resume",
            "trials are not resumed between rungs here: each runs once, "
            "up to the largest budget, and weak ones are stopped early",
        )
    sweep["tuner"] = {"name": "random", "args": args}
    if not (isinstance(max_iter, int) and isinstance(eta, int) and max_iter >= 1 and eta >= 2):
        if max_iter is not None and eta is not None:
            m.fail(path, f"max_iter must be a whole number >= 1 and eta >= 2, not {max_iter!r}, {eta!r}")
        return
    sweep["early_stopping"] = {
        "name": "hyperband",
        "args": {"min_resource": 1, "max_resource": max_iter, "reduction_factor": eta},
    }
    sweep["max_trials"] = hyperband_trials(max_iter, eta)
    if isinstance(resource, dict) and isinstance(resource.get("name"), str):
        kind = resource.get("type", "int")
        sweep.setdefault("fixed", {})[resource["name"]] = float(max_iter) if kind == "float" else max_iter
    elif resource is not None:
        m.fail(f"{path}.resource", "must be a mapping with name (and type int or float)")
