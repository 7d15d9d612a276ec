"""Grid search over continuous parameters, as NNI's GridSearch tuner does it.

NNI's grid handles `uniform`, `loguniform`, `normal` and their q- and log- variants by
searching in "epochs": the first tries each one's middle (the 1/2 quantile), the next adds
the 1/4 and 3/4 points, then the eighths, and so on, never repeating a configuration
(choices and randint are enumerated fully in every epoch). A normal parameter is divided
through the inverse of its CDF; log types in log space; q types are rounded, and an
interval whose ends round to the same value is not divided further (and a midpoint that
rounds to a value already tried is not added, so q-types reach every value). A space with a
continuous parameter thus never runs out (the sweep runs until stopped or its budget ends);
one of q-types only ends when every reachable value was tried.

Pure: yields NNI-shaped values and the raw values kubelab's Optuna encoding expects.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from statistics import NormalDist
from typing import Any

from kubelab.sweeps.space import Parameter, SearchSpace

CATEGORICAL = ("choice", "randint")
_QUANTILE_EDGE = 1e-12
_FINEST = 2.0**-40  # intervals narrower than this are not divided: float precision ends there


def needs_progressive(space: SearchSpace) -> bool:
    """True when a grid over `space` has a parameter with no finite list of values."""
    return any(p.grid_values() is None for p in space.walk())


class ProgressiveGrid:
    """The n-th configuration of NNI's grid order, for a space without nested choices."""

    def __init__(self, space: SearchSpace) -> None:
        if space.nested:
            raise ValueError("a progressive grid needs a space without nested choices")
        self.params = tuple(space.params)
        self._found: list[dict[str, Any]] = []
        self._walk = self._configurations()
        self._done = False

    def nth(self, index: int) -> dict[str, Any] | None:
        """The `index`-th configuration (0-based) as {key: raw value}, or None past the end."""
        while len(self._found) <= index and not self._done:
            found = next(self._walk, None)
            if found is None:
                self._done = True
            else:
                self._found.append(found)
        return self._found[index] if index < len(self._found) else None

    def _configurations(self) -> Iterator[dict[str, Any]]:
        grid = [self._first(p) for p in self.params]
        divisions = [self._divisions(p, [(0.0, 0.5), (0.5, 1.0)]) for p in self.params]
        bar = [0] * len(self.params)
        seen: set[str] = set()
        while True:
            for vector in _vectors([len(g) for g in grid]):
                if all(v < b for v, b in zip(vector, bar, strict=True)):
                    continue  # tried in an earlier epoch
                raw = {
                    p.key: self._raw(p, grid[i][v])
                    for i, (p, v) in enumerate(zip(self.params, vector, strict=True))
                }
                values = json.dumps(
                    {
                        p.key: self._value(p, grid[i][v])
                        for i, (p, v) in enumerate(zip(self.params, vector, strict=True))
                    },
                    sort_keys=True,
                )
                if values not in seen:
                    seen.add(values)
                    yield raw
            for i, param in enumerate(self.params):
                bar[i] = len(grid[i])
                if param.type in CATEGORICAL:
                    continue
                taken = {self._value(param, u) for u in grid[i]}
                halves = []
                for low, high in divisions[i]:
                    middle = (low + high) / 2
                    if self._value(param, middle) not in taken:  # a q-type's mid may repeat a value
                        taken.add(self._value(param, middle))
                        grid[i].append(middle)
                    pieces = ((low, middle), (middle, high))
                    halves += [(a, b) for a, b in pieces if self._divisible(param, a, b)]
                divisions[i] = halves
            if not any(divisions):
                return  # every q-type value reachable was tried

    def _first(self, param: Parameter) -> list[Any]:
        if param.type == "choice":
            return list(range(len(param.options)))
        if param.type == "randint":
            return list(range(int(param.high) - int(param.low)))
        return [0.5]

    def _divisions(self, param: Parameter, halves: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if param.type in CATEGORICAL:
            return []
        return [(low, high) for low, high in halves if self._divisible(param, low, high)]

    def _divisible(self, param: Parameter, x: float, y: float) -> bool:
        """An interval is divided further while its ends differ (q rounding can make them equal)."""
        return y - x > _FINEST and self._value(param, x) < self._value(param, y)

    def _value(self, param: Parameter, u: Any) -> Any:
        """The NNI value at grid point `u` (an index for categorical types, a quantile otherwise)."""
        if param.type == "choice":
            return param.options[u].value
        if param.type == "randint":
            return int(param.low) + u
        kind = param.type
        if kind in ("normal", "qnormal", "lognormal", "qlognormal"):
            u = min(max(u, _QUANTILE_EDGE), 1 - _QUANTILE_EDGE)
            x = NormalDist(param.mu, param.sigma).inv_cdf(u)
            if kind in ("lognormal", "qlognormal"):
                x = math.exp(x)
        elif kind in ("loguniform", "qloguniform"):
            low, high = math.log(param.low), math.log(param.high)
            x = math.exp(low + (high - low) * u)
        else:
            x = param.low + (param.high - param.low) * u
        return param.quantize(x)

    def _raw(self, param: Parameter, u: Any) -> Any:
        """What `kubelab.sweeps.encoding` decodes into that value (the quantile for normal types)."""
        if param.type in ("normal", "qnormal", "lognormal", "qlognormal"):
            from kubelab.sweeps.encoding import QUANTILE_HIGH, QUANTILE_LOW

            return min(max(u, QUANTILE_LOW), QUANTILE_HIGH)
        value = self._value(param, u)
        if param.type in ("uniform", "loguniform"):
            return min(max(value, float(param.low)), float(param.high))
        return value


def _vectors(sizes: list[int]) -> Iterator[list[int]]:
    """Every index vector, the last dimension changing fastest (NNI's order)."""
    vector = [0] * len(sizes)
    while True:
        yield list(vector)
        for i in reversed(range(len(sizes))):
            if vector[i] + 1 < sizes[i]:
                vector[i] += 1
                break
            vector[i] = 0
        else:
            return
