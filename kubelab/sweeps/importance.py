"""A sweep's parameter importance: computed when a viewer asks, cached until more trials finish.

Only people look at importance (the sweep view, `kubelab sweep show`, `GET sweeps/<id>`), so
nothing on a sweep's own path computes it: not the driver, not `kubelab sweep --wait`, which
would otherwise import Optuna and load the study just to print a number nobody asked for.
The answer is kept in the sweep's `importance.json` with the number of finished trials it
saw; the next look computes again only once that number has changed.

The evaluator is always Optuna's PED-ANOVA, which needs nothing beyond numpy: Optuna's
default (fANOVA) fits scikit-learn forests, so both its answer and its cost (seconds, not
milliseconds) would depend on whether scikit-learn happens to be installed. `EVALUATOR`
names it in the cache and in the record (`importance_evaluator`).
"""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

from kubelab.driver_store import write_json
from kubelab.sweeps.store import SweepDirectory, SweepState

EVALUATOR = "ped-anova"
CACHE_NAME = "importance.json"
_STORAGES: dict[str, Any] = {}  # a server keeps each sweep's journal replayed between looks


def importance(sweep: SweepDirectory, state: SweepState) -> dict[str, float]:
    """Parameter importance by `EVALUATOR`, from the cache while no more trials have finished."""
    finished = sum(1 for entry in state.trials.values() if entry.final)
    cache = sweep.path / CACHE_NAME
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(cache.read_text())
        if kept.get("finished") == finished and kept.get("evaluator") == EVALUATOR:
            return {str(k): float(v) for k, v in kept["scores"].items()}
    scores = compute(sweep)
    with contextlib.suppress(OSError):  # a read-only viewer still gets its answer
        write_json(cache, {"finished": finished, "evaluator": EVALUATOR, "scores": scores})
    return scores


def compute(sweep: SweepDirectory) -> dict[str, float]:
    """PED-ANOVA over the study on disk; empty until two trials have completed.

    Read-only: opening a `Tuner` here could race the live driver's writes to its study.
    """
    if not sweep.study_file.exists():
        return {}
    import warnings

    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances
    from optuna.trial import TrialState

    key = str(sweep.path)
    if key not in _STORAGES:
        _STORAGES[key] = sweep.storage()
    try:
        study = optuna.load_study(study_name=sweep.id, storage=_STORAGES[key])
        if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < 2:
            return {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores = get_param_importances(study, evaluator=PedAnovaImportanceEvaluator())
    except (KeyError, ValueError, RuntimeError):  # no study yet, or nothing varied
        return {}
    return {name: float(score) for name, score in scores.items() if math.isfinite(score)}
