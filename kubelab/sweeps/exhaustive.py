"""The sampler of the grid and bruteforce tuners (imports Optuna)."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import TrialState


class ExhaustiveSampler(optuna.samplers.BruteForceSampler):
    """BruteForceSampler without its end-of-search `study.stop()`.

    That call is only legal inside `study.optimize`; an ask-and-tell driver gets a
    RuntimeError at the last `tell` instead. `Tuner.exhausted()` counts configurations itself.
    """

    def after_trial(self, study: Any, trial: Any, state: TrialState, values: Any) -> None:
        return None
