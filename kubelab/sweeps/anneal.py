"""NNI's `Anneal` tuner as an Optuna sampler — the one sampler kubelab writes itself.

Why: NNI's Anneal is hyperopt's `anneal` algorithm, and Optuna ships nothing like it (its
simulated-annealing sampler is a tutorial example; OptunaHub downloads code from GitHub at
run time, which a cluster without internet cannot do). The algorithm is small:

1. The first `n_startup_trials` trials sample the prior (Optuna's RandomSampler).
2. Afterwards each trial picks an incumbent among the best finished trials — the k-th best
   with k drawn from a geometric distribution of mean `avg_best_idx`, as hyperopt does — and
   samples every parameter near the incumbent's value, in a window that shrinks as
   `1 / (1 + shrink_coef * n_finished)` of the range (in log space for log parameters).
   A categorical keeps the incumbent's choice with probability `1 - window`, else draws
   uniformly. A parameter the incumbent never had (a conditional one) samples the prior.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState


class AnnealSampler(BaseSampler):
    def __init__(
        self,
        seed: int | None = None,
        n_startup_trials: int = 1,
        shrink_coef: float = 0.1,
        avg_best_idx: float = 2.0,
    ) -> None:
        self._rng = np.random.RandomState(seed)
        self._random = RandomSampler(seed=seed)
        self._n_startup_trials = n_startup_trials
        self._shrink_coef = shrink_coef
        self._avg_best_idx = avg_best_idx
        self._incumbents: dict[int, tuple[FrozenTrial | None, float]] = {}

    def reseed_rng(self) -> None:
        self._rng = np.random.RandomState()
        self._random.reseed_rng()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        """Choose one incumbent per trial so all its parameters move around the same point."""
        finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(finished) < self._n_startup_trials:
            self._incumbents[trial.number] = (None, 1.0)
            return
        # COMPLETE trials always hold a value
        ranked = sorted(
            finished, key=lambda t: t.value or 0.0, reverse=study.direction == StudyDirection.MAXIMIZE
        )
        index = min(int(self._rng.geometric(1.0 / self._avg_best_idx)) - 1, len(ranked) - 1)
        window = 1.0 / (1.0 + self._shrink_coef * len(finished))
        self._incumbents[trial.number] = (ranked[index], window)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self._incumbents.pop(trial.number, None)

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        incumbent, window = self._incumbents.get(trial.number, (None, 1.0))
        if incumbent is None or param_name not in incumbent.params:
            return self._random.sample_independent(study, trial, param_name, param_distribution)
        center = incumbent.params[param_name]
        if isinstance(param_distribution, CategoricalDistribution):
            if center in param_distribution.choices and self._rng.rand() >= window:
                return center
            return param_distribution.choices[self._rng.randint(len(param_distribution.choices))]
        if isinstance(param_distribution, (FloatDistribution, IntDistribution)):
            return self._near(float(center), param_distribution, window)
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def _near(self, center: float, dist: FloatDistribution | IntDistribution, window: float) -> float | int:
        low, high = float(dist.low), float(dist.high)
        scale = math.log if dist.log else float
        lo, hi = scale(low), scale(high)
        position = (scale(min(max(center, low), high)) - lo) / (hi - lo) if hi > lo else 0.0
        u = self._rng.uniform(max(0.0, position - window / 2), min(1.0, position + window / 2))
        x = lo + u * (hi - lo)
        value = math.exp(x) if dist.log else x
        if dist.step is not None:
            value = low + round((value - low) / dist.step) * dist.step
        value = min(max(value, low), high)
        return int(round(value)) if isinstance(dist, IntDistribution) else value
