"""How each NNI parameter type becomes an Optuna distribution, and the sampled value an NNI value.

Optuna has no unbounded or log-and-step distributions, so some types are searched in a
stand-in variable and converted back (docs/sweeps.md has the table):

- `quniform` whose low and high are multiples of q: `FloatDistribution(step=q)`, exact.
  Otherwise, and for `qloguniform`: a continuous (log) float rounded with NNI's rule
  afterwards, which is what NNI's own tuners do. Grid search needs the finite set, so
  there they become a categorical over every reachable value.
- `normal`, `qnormal`, `lognormal`, `qlognormal`: Optuna searches the normal's quantile
  u in [Φ(-4), Φ(4)] and the value is `mu + sigma * Φ⁻¹(u)` (then exp / rounding). A
  uniform sampler thus draws the true normal (truncated at ±4 sigma, a 6e-5 tail), and
  model-based samplers see a monotone transform of the parameter.
"""

from __future__ import annotations

import math
from decimal import Decimal
from statistics import NormalDist
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from kubelab.sweeps.space import Parameter, Scalar

TAIL_SIGMAS = 4.0
_STANDARD = NormalDist()
QUANTILE_LOW = _STANDARD.cdf(-TAIL_SIGMAS)
QUANTILE_HIGH = _STANDARD.cdf(TAIL_SIGMAS)


def aligned(param: Parameter) -> bool:
    """True when a quniform's bounds are multiples of q, so Optuna's step grid equals NNI's values."""
    if param.type != "quniform":
        return False
    q = Decimal(str(param.args[2]))
    return all((Decimal(str(bound)) / q) % 1 == 0 for bound in (param.low, param.high))


def distribution(param: Parameter, finite: bool = False) -> BaseDistribution:
    """The Optuna distribution searched for `param`; `finite` asks for an enumerable one (grid)."""
    kind = param.type
    if kind == "choice":
        return CategoricalDistribution([option.value for option in param.options])
    if kind == "randint":
        return IntDistribution(int(param.low), int(param.high) - 1)
    if kind == "uniform":
        return FloatDistribution(param.low, param.high)
    if kind == "loguniform":
        return FloatDistribution(param.low, param.high, log=True)
    if kind == "quniform" and aligned(param):
        return FloatDistribution(param.low, param.high, step=param.args[2])
    if kind in ("quniform", "qloguniform"):
        if finite:
            values = param.grid_values()
            if values is None:
                raise ValueError(f"{param.name} has too many values to enumerate")
            return CategoricalDistribution(values)
        return FloatDistribution(param.low, param.high, log=kind == "qloguniform")
    return FloatDistribution(QUANTILE_LOW, QUANTILE_HIGH)


def decode(param: Parameter, raw: Any) -> Scalar:
    """The NNI value for what Optuna sampled (choices are returned as the option's value)."""
    kind = param.type
    if kind == "choice":
        chosen: Scalar = raw
        return chosen
    if kind == "randint":
        return int(raw)
    x = float(raw)
    if kind in ("normal", "qnormal", "lognormal", "qlognormal"):
        u = min(max(x, QUANTILE_LOW), QUANTILE_HIGH)
        x = param.mu + param.sigma * _STANDARD.inv_cdf(u)
        if kind in ("lognormal", "qlognormal"):
            x = math.exp(x)
        return param.quantize(x)
    if kind in ("uniform", "loguniform"):
        return min(max(x, float(param.low)), float(param.high))
    return param.quantize(x)


def suggest(trial: Any, param: Parameter, dist: BaseDistribution) -> Any:
    """Ask an Optuna trial for `param` through the public suggest API."""
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(param.key, dist.choices)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(param.key, dist.low, dist.high, step=dist.step, log=dist.log)
    assert isinstance(dist, FloatDistribution)
    return trial.suggest_float(param.key, dist.low, dist.high, step=dist.step, log=dist.log)
