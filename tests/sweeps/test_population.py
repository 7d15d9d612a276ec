"""PBT's pure part: how a member's hyperparameters are explored and how one generation's results
become the next generation (who is copied, by whom, with what)."""

from __future__ import annotations

import random

import pytest

from kubelab.sweeps.population import Member, PopulationStuck, Settings, explore, next_generation, scale
from kubelab.sweeps.space import SearchSpace

SPACE = SearchSpace.parse(
    {
        "lr": {"_type": "loguniform", "_value": [0.001, 0.1]},
        "batch": {"_type": "quniform", "_value": [16, 128, 16]},
        "layers": {"_type": "randint", "_value": [1, 5]},
        "opt": {"_type": "choice", "_value": ["sgd", "adam"]},
    }
)
PARAMS = {"lr": 0.01, "batch": 64.0, "layers": 2, "opt": "adam"}


def test_scaling_keeps_a_value_in_its_range_and_on_its_grid() -> None:
    lr, batch, layers = (next(p for p in SPACE if p.name == n) for n in ("lr", "batch", "layers"))
    assert scale(lr, 0.01, 1.2) == pytest.approx(0.012)
    assert scale(lr, 0.09, 1.2) == 0.1  # clipped to high
    assert scale(batch, 64.0, 1.2) == 80.0  # 76.8 onto the grid of 16
    assert scale(batch, 128.0, 1.2) == 128.0
    assert scale(layers, 4, 1.2) == 4 and isinstance(scale(layers, 4, 1.2), int)  # upper bound excluded
    assert scale(layers, 2, 0.8) == 2  # 1.6 rounds back to 2


def test_explore_scales_numbers_and_keeps_choices_without_resampling() -> None:
    settings = Settings(factors=(1.2, 0.8), resample_probability=0.0)
    for seed in range(20):
        explored = explore(PARAMS, SPACE, settings, random.Random(seed))
        assert explored["opt"] == "adam"
        assert explored["lr"] == pytest.approx(0.012) or explored["lr"] == pytest.approx(0.008)
        assert explored["batch"] in (80.0, 48.0)


def test_explore_resamples_from_the_space_with_its_probability() -> None:
    settings = Settings(resample_probability=1.0)
    seen = {explore(PARAMS, SPACE, settings, random.Random(seed))["opt"] for seed in range(30)}
    assert seen == {"sgd", "adam"}
    for seed in range(30):
        explored = explore(PARAMS, SPACE, settings, random.Random(seed))
        assert 0.001 <= explored["lr"] <= 0.1 and explored["batch"] % 16 == 0 and 1 <= explored["layers"] < 5


def test_the_bottom_fraction_copies_the_top_and_failed_members_are_replaced() -> None:
    members = [
        Member(0, 10, 0.5, {**PARAMS, "lr": 0.05}),
        Member(1, 11, 0.9, {**PARAMS, "lr": 0.09}),  # best (maximize)
        Member(2, 12, None, {**PARAMS, "lr": 0.02}),  # failed
        Member(3, 13, 0.7, {**PARAMS, "lr": 0.07}),
        Member(4, 14, 0.1, {**PARAMS, "lr": 0.01}),  # worst
    ]
    settings = Settings(population_size=5, fraction=0.2, resample_probability=0.0)
    plans = next_generation(members, settings, SPACE, "maximize", random.Random(0))
    assert [p.member for p in plans] == [0, 1, 2, 3, 4]
    assert [p.exploited for p in plans] == [False, False, True, False, True]
    assert all(p.parent == 11 for p in plans if p.exploited)  # the top fifth is member 1 alone
    assert [p.parent for p in plans if not p.exploited] == [10, 11, 13]
    assert plans[0].params == members[0].params


def test_a_generation_without_any_result_cannot_be_continued() -> None:
    members = [Member(0, 0, None, PARAMS), Member(1, 1, None, PARAMS)]
    with pytest.raises(PopulationStuck, match="no member of the generation finished with a result"):
        next_generation(members, Settings(population_size=2), SPACE, "minimize", random.Random(0))
