"""Tuners and pruners on real Optuna studies: optimization, refusals, results and restarts."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

from kubelab.errors import Conflict, NotFound, ValidationError
from kubelab.sweeps.anneal import AnnealSampler
from kubelab.sweeps.pruners import resolve_pruner
from kubelab.sweeps.space import SearchSpace
from kubelab.sweeps.tuner_catalog import resolve_tuner
from kubelab.sweeps.tuners import SweepExhausted, Tuner

optuna.logging.set_verbosity(optuna.logging.WARNING)

NUMERIC = SearchSpace.parse(
    {
        "x": {"_type": "uniform", "_value": [-5, 5]},
        "k": {"_type": "randint", "_value": [0, 4]},
        "z": {"_type": "normal", "_value": [0, 1]},
    }
)
MIXED = SearchSpace.parse(
    {
        "x": {"_type": "uniform", "_value": [-5, 5]},
        "opt": {"_type": "choice", "_value": ["sgd", "adam"]},
    }
)
NESTED = SearchSpace.parse(
    {
        "x": {"_type": "quniform", "_value": [-4, 4, 2]},
        "layer": {
            "_type": "choice",
            "_value": [
                {"_name": "empty"},
                {"_name": "conv", "kernel": {"_type": "choice", "_value": [1, 3, 5]}},
            ],
        },
    }
)


def best_of(tuner: Tuner) -> dict[str, Any]:
    best = tuner.best()
    assert best is not None
    return best


def objective(params: dict[str, Any]) -> float:
    return float((params["x"] - 2) ** 2 + params.get("k", 0) + params.get("z", 0) ** 2)


def run(tuner: Tuner, n: int) -> list[tuple[dict[str, Any], float]]:
    told = []
    for _ in range(n):
        suggestion = tuner.ask()
        value = objective(suggestion.flat)
        tuner.tell(suggestion.number, value)
        told.append((suggestion.params, value))
    return told


def problems(call: Callable[[], object]) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        call()
    return {f.path: f.reason for f in info.value.fields}


# -- every tuner runs a real optimization ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "space", "args"),
    [
        ("tpe", NUMERIC, {"n_startup_trials": 5}),
        ("random", NUMERIC, {}),
        ("evolution", MIXED, {"population_size": 8}),
        ("cmaes", NUMERIC, {"n_startup_trials": 3}),
        ("gp", NUMERIC, {"n_startup_trials": 5}),
        ("qmc", MIXED, {"scramble": True}),
        ("anneal", NESTED, {"n_startup_trials": 5}),
        ("tpe", NESTED, {"multivariate": True, "group": True}),
    ],
)
def test_tuner_optimizes_within_bounds(name: str, space: SearchSpace, args: dict[str, Any]) -> None:
    tuner = Tuner(space, name, {"seed": 11, **args})
    told = run(tuner, 16 if name == "gp" else 25)
    for params, _ in told:
        assert -5 <= params["x"] <= 5
        if "k" in params:
            assert params["k"] in range(4)
        if "opt" in params:
            assert params["opt"] in ("sgd", "adam")
    best_value = min(value for _, value in told)
    best = best_of(tuner)
    assert best["value"] == best_value
    assert objective(SearchSpace.flatten(space, best["params"])) == best_value
    assert len({str(p) for p, _ in told}) >= 5  # it explores rather than repeating itself


def test_model_based_tuners_beat_their_own_start() -> None:
    tuner = Tuner(NUMERIC, "tpe", {"seed": 3, "n_startup_trials": 10})
    told = run(tuner, 40)
    startup_best = min(v for _, v in told[:10])
    assert best_of(tuner)["value"] <= startup_best


def test_same_seed_same_suggestions() -> None:
    first = [s for s, _ in run(Tuner(NUMERIC, "tpe", {"seed": 5, "n_startup_trials": 3}), 8)]
    second = [s for s, _ in run(Tuner(NUMERIC, "tpe", {"seed": 5, "n_startup_trials": 3}), 8)]
    assert first == second


def test_maximize_picks_the_largest() -> None:
    tuner = Tuner(MIXED, "random", {"seed": 1, "optimize_mode": "maximize"})
    told = run(tuner, 10)
    assert tuner.direction == "maximize"
    assert best_of(tuner)["value"] == max(v for _, v in told)


# -- exhaustive tuners ----------------------------------------------------------------------


def test_grid_enumerates_exactly_the_product_then_is_exhausted() -> None:
    space = SearchSpace.parse(
        {
            "a": {"_type": "choice", "_value": ["x", "y"]},
            "n": {"_type": "randint", "_value": [0, 3]},
            "q": {"_type": "quniform", "_value": [1, 10, 3]},
        }
    )
    tuner = Tuner(space, "grid", {"seed": 0})
    seen = []
    while not tuner.exhausted():
        suggestion = tuner.ask()
        tuner.tell(suggestion.number, 1.0)
        seen.append(tuple(suggestion.params.values()))
    assert sorted(seen) == sorted(itertools.product(["x", "y"], range(3), [1.0, 3.0, 6.0, 9.0]))
    with pytest.raises(SweepExhausted):
        tuner.ask()


def test_bruteforce_walks_nested_choices_without_repeats_even_while_trials_run() -> None:
    tuner = Tuner(NESTED, "bruteforce", {"seed": 2})
    size = NESTED.grid_size()
    assert size is not None
    running = [tuner.ask() for _ in range(size)]  # none told yet: concurrency
    shapes = {str(s.params) for s in running}
    assert len(shapes) == NESTED.grid_size() == 5 * 4
    assert tuner.exhausted()


def test_batch_returns_the_listed_configurations_in_order() -> None:
    configs: list[dict[str, Any]] = [
        {"lr": 0.1, "opt": "sgd"},
        {"lr": 0.01},
        {"lr": 0.001, "opt": "adam", "warm": True},
    ]
    tuner = Tuner(SearchSpace.empty(), "batch", batch=configs)
    got = []
    while not tuner.exhausted():
        suggestion = tuner.ask()
        got.append(suggestion.params)
        assert suggestion.flat == suggestion.params
        tuner.tell(suggestion.number, suggestion.params["lr"])
    assert got == configs
    assert best_of(tuner)["params"] == configs[2]
    assert set(tuner.importance()) == {"lr", "opt", "warm"}
    with pytest.raises(SweepExhausted):
        tuner.ask()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Tuner(
            SearchSpace.empty(), "batch", batch=[{"lr": 0.1}, {"lr": 0.01, "opt": "adam"}, {"lr": 1}]
        ),
        lambda: Tuner(NESTED, "bruteforce", {"seed": 1}),
        lambda: Tuner(MIXED, "grid", {"seed": 1}),  # continuous: divided ever finer
        lambda: Tuner(NESTED, "tpe", {"seed": 1}),
    ],
    ids=["batch", "bruteforce", "progressive-grid", "tpe"],
)
def test_a_rerun_repeats_the_parameters_and_leaves_the_walk_where_it_was(make: Callable[[], Tuner]) -> None:
    plain, tuner = make(), make()
    expected = [plain.ask().params for _ in range(3)]
    first, second = tuner.ask(), tuner.ask()
    for s in (first, second):
        tuner.tell(s.number, None, "failed")  # interrupted by the sweep's stop
    again = tuner.rerun(first.number)
    assert again.number == 2 and again.params == first.params and again.flat == first.flat
    assert tuner.reruns() == {first.number}
    assert tuner.rerun(again.number).params == first.params  # a rerun interrupted in turn
    assert tuner.ask().params == expected[2]  # the walk goes on from where it was
    assert tuner.reruns() == {first.number, again.number}
    assert tuner.suggestion(again.number).params == first.params


# -- refusals -------------------------------------------------------------------------------


def test_grid_divides_continuous_parameters_ever_finer_as_nni_does() -> None:
    """NNI's grid: middles first, then quartiles, eighths...; normal types by their quantiles."""
    space = SearchSpace.parse(
        {
            "opt": {"_type": "choice", "_value": ["sgd", "adam"]},
            "lr": {"_type": "loguniform", "_value": [0.001, 0.1]},
            "g": {"_type": "normal", "_value": [0, 1]},
        }
    )
    tuner = Tuner(space, "grid")
    seen = []
    for _ in range(10):
        s = tuner.ask()
        seen.append(s.params)
        tuner.tell(s.number, 1.0)
    assert [p["opt"] for p in seen[:2]] == ["sgd", "adam"]
    assert seen[0]["lr"] == pytest.approx(0.01) and seen[0]["g"] == pytest.approx(0.0, abs=1e-9)
    epoch_two = {(p["opt"], round(p["lr"], 6), round(p["g"], 4)) for p in seen[2:]}
    assert ("sgd", round(0.001**0.75 * 0.1**0.25, 6), 0.0) in epoch_two
    assert ("sgd", 0.01, -0.6745) in epoch_two
    assert len({json.dumps(p, sort_keys=True) for p in seen}) == 10  # never repeats
    assert not tuner.exhausted()  # continuous: runs until stopped, as NNI's grid does


def test_grid_over_q_types_ends_after_every_reachable_value() -> None:
    space = SearchSpace.parse(
        {"z": {"_type": "quniform", "_value": [2, 3, 1]}, "x": {"_type": "choice", "_value": [5, 7]}}
    )
    tuner = Tuner(space, "grid")
    values = []
    while not tuner.exhausted():
        s = tuner.ask()
        values.append((s.params["z"], s.params["x"]))
        tuner.tell(s.number, 0.0)
    assert sorted(values) == [(2, 5), (2, 7), (3, 5), (3, 7)]


def test_cmaes_refuses_choice_and_gp_qmc_refuse_nested() -> None:
    assert (
        "choice is categorical and CMA-ES searches numbers only"
        in problems(lambda: Tuner(MIXED, "cmaes"))["space.opt"]
    )
    for name in ("gp", "qmc"):
        reason = problems(partial(Tuner, NESTED, name))["space.layer"]
        assert reason.startswith(
            f"{name} cannot search 'layer': its nested options make parameters conditional"
        )


def test_empty_space_and_batch_misuse_are_refused() -> None:
    assert "is empty" in problems(lambda: Tuner(SearchSpace.empty(), "tpe"))["space"]
    assert "leave space out" in problems(lambda: Tuner(MIXED, "batch", batch=[{"a": 1}]))["space"]
    assert "only for the batch tuner" in problems(lambda: Tuner(MIXED, "tpe", batch=[{"a": 1}]))["batch"]
    found = problems(lambda: Tuner(SearchSpace.empty(), "batch", batch=cast(Any, [{"a": [1, 2]}, "x"])))
    assert "must be a number, string" in found["batch[0].a"]
    assert "non-empty mapping" in found["batch[1]"]
    assert "non-empty list" in problems(lambda: Tuner(SearchSpace.empty(), "batch"))["batch"]


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ("tpee", "tuner", "unknown tuner 'tpee'; did you mean 'tpe'?"),
        ({"name": "tpe", "args": {"n_startup_trial": 3}}, "tuner.args.n_startup_trial",
         "did you mean 'n_startup_trials'?"),
        ({"name": "tpe", "args": {"seed": -1}}, "tuner.args.seed", "at least 0"),
        ({"name": "tpe", "args": {"n_ei_candidates": True}}, "tuner.args.n_ei_candidates", "whole number"),
        ({"name": "tpe", "args": {"prior_weight": 0}}, "tuner.args.prior_weight", "above 0"),
        ({"name": "tpe", "args": {"optimize_mode": "maximise"}}, "tuner.args.optimize_mode",
         "did you mean 'maximize'"),
        ({"name": "tpe", "args": {"group": True}}, "tuner.args.group", "needs multivariate"),
        ({"name": "tpe", "args": {"linear_forgetting": 25}}, "tuner.args.linear_forgetting", "no Optuna equivalent"),
        ({"name": "tpe", "args": {"startup_trials": 3, "n_startup_trials": 4}}, "tuner.args.n_startup_trials",
         "given twice"),
        ({"name": "GPTuner", "args": {"utility": "ei"}}, "tuner.args.utility", "no equivalent in Optuna's GPSampler"),
        ({"name": "evolution", "args": {"mutation_prob": 2}}, "tuner.args.mutation_prob", "at most 1"),
        ({"name": "qmc", "args": {"qmc_type": "lhs"}}, "tuner.args.qmc_type", "sobol, halton"),
        ({"name": "tpe", "args": ["seed"]}, "tuner.args", "must be a mapping"),
        ({"name": "tpe", "arg": {}}, "tuner.arg", "did you mean 'args'?"),
        ({"name": 3}, "tuner.name", "must be a string"),
        (3, "tuner", "must be a name or a mapping"),
        ("Hyperband", "tuner", "use tuner 'random' with early_stopping 'hyperband'"),
        ("SMAC", "tuner", "SMAC is not available"),
    ],
)  # fmt: skip
def test_bad_tuner_settings(value: str | int | dict[str, Any], path: str, reason: str) -> None:
    found = problems(lambda: resolve_tuner(value))
    assert reason in found[path], found


def test_nni_names_and_arguments_map_to_optuna() -> None:
    assert resolve_tuner("GridSearch").name == "grid"
    assert resolve_tuner("BatchTuner").name == "batch"
    assert resolve_tuner({"name": "sobol"}).kwargs == {"qmc_type": "sobol"}
    choice = resolve_tuner(
        {
            "name": "TPE",
            "args": {
                "optimize_mode": "maximize",
                "tpe_args": {"n_startup_jobs": 7, "constant_liar_type": "min"},
            },
        }
    )
    assert (choice.name, choice.direction) == ("tpe", "maximize")
    assert choice.kwargs == {"n_startup_trials": 7, "constant_liar": True}
    cmaes = resolve_tuner({"name": "CMA-ES", "args": {"population_size": 6, "startup_trials": 2}})
    assert cmaes.kwargs == {"popsize": 6, "n_startup_trials": 2}
    assert resolve_tuner({"name": "GPTuner", "args": {"cold_start_num": 4}}).kwargs == {"n_startup_trials": 4}


def test_directions_must_agree() -> None:
    found = problems(lambda: Tuner(MIXED, "tpe", {"optimize_mode": "maximize"}, direction="minimize"))
    assert "objective.direction says minimize" in found["tuner.args.optimize_mode"]
    found = problems(lambda: Tuner(MIXED, direction="up"))
    assert "minimize or maximize" in found["direction"]


def test_missing_optional_package_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "scipy" else real(name, *a)
    )
    found = problems(lambda: Tuner(NUMERIC, "gp"))
    assert found["tuner.name"] == "gp needs the Python packages scipy; install them first"


# -- results ----------------------------------------------------------------------------------


def test_tell_records_states_and_is_idempotent() -> None:
    tuner = Tuner(MIXED, "random", {"seed": 4})
    a, b, c, d = (tuner.ask() for _ in range(4))
    assert tuner.tell(a.number, 1.5) == "complete"
    assert tuner.tell(a.number, 1.5) == "complete"  # a restarted driver may repeat itself
    assert tuner.tell(b.number, float("nan")) == "failed"
    assert tuner.tell(c.number, state="pruned") == "pruned"
    assert tuner.tell(d.number, state="failed") == "failed"
    assert [t.state for t in tuner.trials()] == ["complete", "failed", "pruned", "failed"]
    with pytest.raises(Conflict, match="already finished as complete"):
        tuner.tell(a.number, state="failed")
    with pytest.raises(NotFound):
        tuner.tell(99, 1.0)
    e = tuner.ask()
    assert "objective value" in problems(lambda: tuner.tell(e.number, None))["value"]
    assert "must be one of" in problems(lambda: tuner.tell(e.number, 1.0, state="done"))["state"]
    assert best_of(tuner)["number"] == a.number


def test_best_and_importance_before_any_result() -> None:
    tuner = Tuner(MIXED, "tpe", {"seed": 1})
    assert tuner.best() is None
    assert tuner.importance() == {}
    run(tuner, 12)
    importance = tuner.importance()
    assert set(importance) == {"x", "opt"}
    assert importance["x"] > importance["opt"]  # the objective ignores opt


def test_storage_needs_a_study_name(tmp_path: Path) -> None:
    found = problems(lambda: Tuner(MIXED, storage=f"sqlite:///{tmp_path}/s.db"))
    assert "is required with a storage" in found["study_name"]


# -- pruners ------------------------------------------------------------------------------------


def feed(tuner: Tuner, curve: Callable[..., float], steps: int = 10) -> bool:
    """Report a trial's learning curve; True if the pruner stopped it."""
    suggestion = tuner.ask()
    for step in range(steps):
        if tuner.report(suggestion.number, step, curve(step)):
            tuner.tell(suggestion.number, state="pruned")
            return True
    tuner.tell(suggestion.number, curve(steps - 1))
    return False


@pytest.mark.parametrize(
    "pruner",
    [
        "median",
        {"name": "Medianstop", "args": {"start_step": 2}},
        {"name": "hyperband", "args": {"min_resource": 1, "max_resource": 10, "reduction_factor": 3}},
        {"name": "asha", "args": {"min_resource": 1, "reduction_factor": 2}},
    ],
)
def test_pruner_stops_a_clearly_bad_trial(pruner: str | dict[str, Any]) -> None:
    # Hyperband puts a trial in a bracket by a hash of the study's name and the trial's number;
    # a fixed name keeps that (and so this test) the same on every run.
    tuner = Tuner(MIXED, "random", {"seed": 0}, pruner=pruner, study_name="pruning")
    good = [feed(tuner, lambda s, i=i: 1.0 / (s + 1) + 0.01 * i) for i in range(12)]
    assert not all(good)  # the good trials mostly finish
    assert feed(tuner, lambda s: 100.0 + s)


def test_no_pruner_never_stops() -> None:
    tuner = Tuner(MIXED, "random", {"seed": 0}, pruner="none")
    for i in range(6):
        feed(tuner, lambda s, i=i: 1.0 / (s + 1) + i)
    assert not feed(tuner, lambda s: 100.0 + s)


def test_report_errors() -> None:
    tuner = Tuner(MIXED, "random", pruner="median")
    suggestion = tuner.ask()
    assert "whole number >= 0" in problems(lambda: tuner.report(suggestion.number, -1, 1.0))["step"]
    assert "must be a number" in problems(lambda: tuner.report(suggestion.number, 0, cast(Any, "x")))["value"]
    tuner.tell(suggestion.number, 1.0)
    with pytest.raises(Conflict):
        tuner.report(suggestion.number, 1, 1.0)


@pytest.mark.parametrize(
    ("value", "path", "reason"),
    [
        ("Curvefitting", "early_stopping", "Curvefitting has no Optuna equivalent"),
        ("medain", "early_stopping", "did you mean 'median'?"),
        ({"name": "median", "args": {"n_warmup_step": 2}}, "early_stopping.args.n_warmup_step",
         "did you mean 'n_warmup_steps'?"),
        ({"name": "hyperband", "args": {"reduction_factor": 1}}, "early_stopping.args.reduction_factor",
         "at least 2"),
        ({"name": "hyperband", "args": {"min_resource": 5, "max_resource": 2}}, "early_stopping.args.min_resource",
         "must not exceed max_resource"),
        ({"name": "hyperband", "args": {"exec_mode": "serial"}}, "early_stopping.args.exec_mode",
         "no meaning here"),
        ({"name": "asha", "args": {"min_resource": "some"}}, "early_stopping.args.min_resource", "or 'auto'"),
    ],
)  # fmt: skip
def test_bad_pruner_settings(value: str | dict[str, Any], path: str, reason: str) -> None:
    found = problems(lambda: resolve_pruner(value))
    assert reason in found[path], found


def test_nni_assessor_arguments_map_to_optuna() -> None:
    assert resolve_pruner({"name": "Medianstop", "args": {"start_step": 3}}).kwargs == {"n_warmup_steps": 3}
    hyperband = resolve_pruner({"name": "hyperband", "args": {"R": 27, "eta": 3}})
    assert hyperband.kwargs == {"max_resource": 27, "reduction_factor": 3}
    assert resolve_pruner({"name": "asha", "args": {"min_resource": "auto"}}).kwargs == {
        "min_resource": "auto"
    }


# -- the anneal sampler -------------------------------------------------------------------------


def test_anneal_samples_near_the_best_trial() -> None:
    dist = FloatDistribution(-5, 5)
    study = optuna.create_study(sampler=AnnealSampler(seed=0, shrink_coef=1.0))
    study.add_trial(create_trial(params={"x": 3.0}, distributions={"x": dist}, value=0.0))
    for i in range(9):
        study.add_trial(create_trial(params={"x": -5 + 0.2 * i}, distributions={"x": dist}, value=10.0 + i))
    drawn = []
    for _ in range(60):
        trial = study.ask()
        drawn.append(trial.suggest_float("x", -5, 5))
        study.tell(trial, state=optuna.trial.TrialState.FAIL)  # keep the history fixed
    assert all(-5 <= x <= 5 for x in drawn)
    near = sum(abs(x - 3.0) <= 0.5 for x in drawn) / len(drawn)
    assert near > 0.35  # a uniform draw lands there 10% of the time


def test_anneal_samples_the_prior_for_parameters_the_incumbent_lacks() -> None:
    study = optuna.create_study(sampler=AnnealSampler(seed=0))
    study.add_trial(create_trial(params={"x": 1.0}, distributions={"x": FloatDistribution(0, 2)}, value=0.0))
    trial = study.ask()
    assert 0 <= trial.suggest_int("fresh", 0, 9) <= 9
    assert trial.suggest_categorical("c", ["a", "b"]) in ("a", "b")


# -- persistence ------------------------------------------------------------------------------


def test_sqlite_study_survives_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    first = Tuner(
        MIXED, "tpe", {"seed": 9, "n_startup_trials": 2}, storage=url, study_name="s", pruner="median"
    )
    asked = [first.ask() for _ in range(3)]
    first.tell(asked[0].number, 1.0)
    first.tell(asked[1].number, 2.0)
    first.report(asked[2].number, 0, 5.0)
    del first

    again = Tuner(
        MIXED, "tpe", {"seed": 9, "n_startup_trials": 2}, storage=url, study_name="s", pruner="median"
    )
    assert again.running() == [asked[2]]
    assert again.suggestion(asked[0].number) == asked[0]
    assert again.report(asked[2].number, 1, 4.0) is False
    assert again.tell(asked[2].number, 3.0) == "complete"
    following = again.ask()
    assert following.number == 3
    assert following.params not in [s.params for s in asked]
    assert again.best() == {"number": 0, "value": 1.0, "params": asked[0].params}


def test_an_ask_interrupted_by_a_crash_is_finished_on_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    first = Tuner(NESTED, "anneal", {"seed": 1}, storage=url, study_name="s")
    first.study.ask()  # the process died before suggesting any parameter
    again = Tuner(NESTED, "anneal", {"seed": 1}, storage=url, study_name="s")
    (recovered,) = again.running()
    assert recovered.number == 0
    assert set(recovered.params) == {"x", "layer"}


def test_batch_resumes_where_it_stopped(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    configs = [{"a": 1}, {"a": 2}, {"a": 3}]
    first = Tuner(SearchSpace.empty(), "batch", storage=url, study_name="b", batch=configs)
    first.tell(first.ask().number, 1.0)
    again = Tuner(SearchSpace.empty(), "batch", storage=url, study_name="b", batch=configs)
    rest = [again.ask().params for _ in range(2)]
    assert rest == configs[1:]
    assert again.exhausted()


def test_reopening_with_another_sweep_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    Tuner(MIXED, "tpe", storage=url, study_name="s")
    with pytest.raises(Conflict, match="another tuner, search space or batch"):
        Tuner(NUMERIC, "tpe", storage=url, study_name="s")
    with pytest.raises(Conflict, match="created to minimize, not maximize"):
        Tuner(MIXED, "tpe", storage=url, study_name="s", direction="maximize")
    foreign = optuna.create_study(storage=url, study_name="foreign")
    foreign.add_trial(create_trial(params={}, distributions={}, value=1.0))
    with pytest.raises(Conflict, match="outside kubelab"):
        Tuner(MIXED, "tpe", storage=url, study_name="foreign")


def test_seeded_reopen_does_not_replay_the_first_suggestions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/study.db"
    first = Tuner(NUMERIC, "random", {"seed": 3}, storage=url, study_name="r")
    opening = [first.ask().params for _ in range(2)]
    again = Tuner(NUMERIC, "random", {"seed": 3}, storage=url, study_name="r")
    assert again.ask().params not in opening
    assert not math.isnan(again.ask().params["x"])
