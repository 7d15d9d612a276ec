"""The NNI search space: parsing, validation, loading, and sampling with NNI's semantics."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from kubelab.errors import ValidationError
from kubelab.sweeps import encoding
from kubelab.sweeps.space import SearchSpace, load_space
from kubelab.sweeps.tuners import Tuner

optuna.logging.set_verbosity(optuna.logging.WARNING)

NESTED = {
    "lr": {"_type": "loguniform", "_value": [1e-4, 1e-1]},
    "layer": {
        "_type": "choice",
        "_value": [
            {"_name": "empty"},
            {"_name": "conv", "kernel": {"_type": "choice", "_value": [1, 3, 5]}},
            {"_name": "pool", "kernel": {"_type": "randint", "_value": [2, 4]}},
        ],
    },
}


def problems(data: object) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        SearchSpace.parse(data)
    return {f.path: f.reason for f in info.value.fields}


def samples(space: dict[str, Any], n: int = 300, seed: int = 7) -> list[dict[str, Any]]:
    tuner = Tuner(SearchSpace.parse(space), "random", {"seed": seed})
    result = []
    for _ in range(n):
        suggestion = tuner.ask()
        tuner.tell(suggestion.number, 0.0)
        result.append(suggestion.params)
    return result


# -- parsing -------------------------------------------------------------------------


def test_every_type_parses() -> None:
    space = SearchSpace.parse(
        {
            "a": {"_type": "choice", "_value": ["x", 2, 3.5, True, None]},
            "b": {"_type": "randint", "_value": [0, 10]},
            "c": {"_type": "uniform", "_value": [-1, 1]},
            "d": {"_type": "quniform", "_value": [0, 1, 0.1]},
            "e": {"_type": "loguniform", "_value": [1e-5, 1]},
            "f": {"_type": "qloguniform", "_value": [1, 1000, 10]},
            "g": {"_type": "normal", "_value": [0, 1]},
            "h": {"_type": "qnormal", "_value": [0, 1, 0.5]},
            "i": {"_type": "lognormal", "_value": [0, 1]},
            "j": {"_type": "qlognormal", "_value": [0, 1, 0.5]},
        }
    )
    assert [p.type for p in space] == [
        "choice", "randint", "uniform", "quniform", "loguniform",
        "qloguniform", "normal", "qnormal", "lognormal", "qlognormal",
    ]  # fmt: skip
    assert space.grid_size() is None


def test_nested_choice_names_keys_and_grid_size() -> None:
    space = SearchSpace.parse(NESTED)
    assert [p.key for p in space.walk()] == ["lr", "layer", "layer/conv/kernel", "layer/pool/kernel"]
    assert space.flat_names() == ["lr", "layer", "kernel"]
    assert space.flatten({"lr": 0.1, "layer": {"_name": "conv", "kernel": 3}}) == {
        "lr": 0.1,
        "layer": "conv",
        "kernel": 3,
    }
    finite = SearchSpace.parse({"layer": NESTED["layer"], "q": {"_type": "quniform", "_value": [1, 10, 3]}})
    assert finite.grid_size() == (1 + 3 + 2) * 4  # q reaches 1 (clipped 0), 3, 6, 9


def test_quniform_grid_values_follow_nni_rounding_and_clipping() -> None:
    space = SearchSpace.parse({"q": {"_type": "quniform", "_value": [1, 10, 3]}})
    assert space.params[0].grid_values() == [1.0, 3.0, 6.0, 9.0]
    assert space.params[0].quantize(9.9) == 9.0
    assert space.params[0].quantize(0.2) == 1.0


BAD = [
    ({"lr": {"_type": "unifrom", "_value": [0, 1]}}, "space.lr._type", "did you mean 'uniform'"),
    ({"lr": {"_value": [0, 1]}}, "space.lr._type", "is required"),
    ({"lr": {"_type": "uniform", "_value": [0, 1, 2]}}, "space.lr._value", "takes 2 numbers"),
    ({"lr": {"_type": "quniform", "_value": [0, 1]}}, "space.lr._value", "takes 3 numbers [low, high, q]"),
    ({"lr": {"_type": "uniform", "_value": [2, 1]}}, "space.lr._value", "low (2) must not be above high (1)"),
    ({"lr": {"_type": "loguniform", "_value": [0, 1]}}, "space.lr._value[0]", "needs low > 0"),
    ({"lr": {"_type": "qloguniform", "_value": [-1, 1, 0.1]}}, "space.lr._value[0]", "needs low > 0"),
    ({"lr": {"_type": "quniform", "_value": [0, 1, 0]}}, "space.lr._value[2]", "q must be above 0"),
    ({"lr": {"_type": "qnormal", "_value": [0, 1, -1]}}, "space.lr._value[2]", "q must be above 0"),
    ({"lr": {"_type": "normal", "_value": [0, 0]}}, "space.lr._value[1]", "sigma must be above 0"),
    ({"lr": {"_type": "lognormal", "_value": [0, -2]}}, "space.lr._value[1]", "sigma must be above 0"),
    ({"n": {"_type": "randint", "_value": [3, 3]}}, "space.n._value", "upper bound is excluded"),
    ({"n": {"_type": "randint", "_value": [0.5, 3]}}, "space.n._value[0]", "must be integers"),
    ({"n": {"_type": "randint", "_value": [1.0, 2.0]}}, "space.n._value[0]", "must be integers, not 1.0"),
    ({"n": {"_type": "uniform", "_value": [0, "1"]}}, "space.n._value[1]", "finite number"),
    ({"n": {"_type": "uniform", "_value": [0, float("inf")]}}, "space.n._value[1]", "finite number"),
    ({"n": {"_type": "uniform", "_value": [True, 2]}}, "space.n._value[0]", "finite number"),
    ({"n": {"_type": "uniform", "_value": "0,1"}}, "space.n._value", "must be a list"),
    ({"c": {"_type": "choice", "_value": []}}, "space.c._value", "at least one option"),
    ({"c": {"_type": "choice", "_value": [1, 2, 1]}}, "space.c._value[2]", "repeats an earlier option"),
    ({"c": {"_type": "choice", "_value": [[1, 2]]}}, "space.c._value[0]", "not a list"),
    ({"c": {"_type": "choice", "_value": ["a", {"_name": "b"}]}}, "space.c._value", "options mix nested"),
    ({"c": {"_type": "choice", "_value": [{"k": 1}]}}, "space.c._value[0]._name", "needs _name"),
    ({"c": {"_type": "choice", "_value": [1], "_values": 2}}, "space.c._values", "did you mean '_value'"),
    ({"c": [1, 2]}, "space.c", "must be a mapping with _type and _value"),
    ({1: {"_type": "uniform", "_value": [0, 1]}}, "space.1", "must be non-empty strings"),
]


@pytest.mark.parametrize(("data", "path", "reason"), BAD)
def test_bad_space_names_the_field_and_reason(data: dict[str, Any], path: str, reason: str) -> None:
    found = problems(data)
    assert path in found, found
    assert reason in found[path]


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        {
            "a": {"_type": "loguniform", "_value": [0, 1]},
            "b": {"_type": "quniform", "_value": [0, 1, 0]},
            "c": {"_type": "choice", "_value": []},
        }
    )
    assert set(found) == {"space.a._value[0]", "space.b._value[2]", "space.c._value"}


def test_not_a_mapping() -> None:
    assert "must be a mapping" in problems(["lr"])["space"]


def test_nested_names_reused_elsewhere_are_qualified_in_the_flat_parameters() -> None:
    """NNI lets nested spaces reuse names; the flat parameters tell them apart by storage key."""
    space = SearchSpace.parse({"kernel": {"_type": "randint", "_value": [1, 3]}, "layer": NESTED["layer"]})
    assert space.flat_names() == ["kernel", "layer", "layer.conv.kernel", "layer.pool.kernel"]
    flat = space.flatten({"kernel": 2, "layer": {"_name": "conv", "kernel": 5}})
    assert flat == {"kernel": 2, "layer": "conv", "layer.conv.kernel": 5}
    space = SearchSpace.parse(
        {
            "layer": {
                "_type": "choice",
                "_value": [{"_name": "a", "layer": {"_type": "choice", "_value": [1]}}],
            }
        }
    )
    assert space.flatten({"layer": {"_name": "a", "layer": 1}}) == {"layer": "a", "layer.a.layer": 1}
    # two nested choices side by side, both active at once: both are qualified
    space = SearchSpace.parse(
        {
            "enc": {
                "_type": "choice",
                "_value": [{"_name": "a", "width": {"_type": "choice", "_value": [1]}}],
            },
            "dec": {
                "_type": "choice",
                "_value": [{"_name": "b", "width": {"_type": "choice", "_value": [2]}}],
            },
        }
    )
    flat = space.flatten({"enc": {"_name": "a", "width": 1}, "dec": {"_name": "b", "width": 2}})
    assert flat == {"enc": "a", "enc.a.width": 1, "dec": "b", "dec.b.width": 2}


def test_storage_keys_must_be_unique() -> None:
    found = problems({"layer/conv/kernel": {"_type": "randint", "_value": [1, 3]}, "layer": NESTED["layer"]})
    assert "storage key 'layer/conv/kernel'" in found["space.layer._value[1].kernel"]


# -- loading ---------------------------------------------------------------------------


def test_load_space_from_json_yaml_files_and_inline_text(tmp_path: Path) -> None:
    (tmp_path / "space.json").write_text(json.dumps(NESTED))
    (tmp_path / "space.yaml").write_text(
        "lr: {_type: loguniform, _value: [0.0001, 0.1]}\n"
        "layer:\n  _type: choice\n  _value:\n    - {_name: empty}\n"
        "    - {_name: conv, kernel: {_type: choice, _value: [1, 3, 5]}}\n"
        "    - {_name: pool, kernel: {_type: randint, _value: [2, 4]}}\n"
    )
    from_json = load_space(tmp_path / "space.json")
    from_yaml = load_space(str(tmp_path / "space.yaml"))
    assert from_json.to_dict() == from_yaml.to_dict() == NESTED
    assert load_space(json.dumps(NESTED)).to_dict() == NESTED
    assert load_space("x: {_type: uniform, _value: [0, 1]}").params[0].type == "uniform"


def test_duplicate_keys_are_refused_in_json_and_yaml(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="duplicate key 'lr'"):
        load_space(
            '{"lr": {"_type": "uniform", "_value": [0, 1]}, "lr": {"_type": "uniform", "_value": [0, 2]}}'
        )
    path = tmp_path / "space.yml"
    path.write_text("lr: {_type: uniform, _value: [0, 1]}\nlr: {_type: uniform, _value: [0, 2]}\n")
    with pytest.raises(ValidationError, match="duplicate key 'lr'.*line 2"):
        load_space(path)


def test_unreadable_documents_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="no such file"):
        load_space(tmp_path / "missing.json")
    with pytest.raises(ValidationError, match="not valid JSON: line 1"):
        load_space('{"lr": ')
    with pytest.raises(ValidationError, match="not valid YAML"):
        load_space("lr: [unclosed\n  x: y")
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValidationError, match="cannot read"):
        load_space(tmp_path / "bad.json")


def test_errors_from_files_carry_the_root_given() -> None:
    with pytest.raises(ValidationError) as info:
        load_space('{"lr": {"_type": "uniform", "_value": [1, 0]}}', root="space_file")
    assert info.value.fields[0].path == "space_file.lr._value"


# -- sampling with NNI semantics -------------------------------------------------------


def test_randint_excludes_its_upper_bound_and_reaches_every_value() -> None:
    values = {s["n"] for s in samples({"n": {"_type": "randint", "_value": [-2, 3]}}, n=100)}
    assert values == {-2, -1, 0, 1, 2}


def test_uniform_and_loguniform_stay_in_bounds_and_log_is_log() -> None:
    drawn = samples(
        {"u": {"_type": "uniform", "_value": [-3, 5]}, "l": {"_type": "loguniform", "_value": [1e-4, 1]}}
    )
    assert all(-3 <= s["u"] <= 5 and 1e-4 <= s["l"] <= 1 for s in drawn)
    # log-uniform: half the mass lies below the geometric mean (1e-2), not near 0.5
    below = sum(s["l"] < 1e-2 for s in drawn) / len(drawn)
    assert 0.35 < below < 0.65


@pytest.mark.parametrize(
    ("spec", "values"),
    [
        ({"_type": "quniform", "_value": [0, 1, 0.25]}, {0.0, 0.25, 0.5, 0.75, 1.0}),
        ({"_type": "quniform", "_value": [1, 10, 3]}, {1.0, 3.0, 6.0, 9.0}),
        ({"_type": "quniform", "_value": [32, 256, 32]}, {32.0 * k for k in range(1, 9)}),
        (
            {"_type": "qloguniform", "_value": [1, 100, 10]},
            {1.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0},
        ),
    ],
)
def test_q_types_give_only_nni_values(spec: dict[str, Any], values: set[float]) -> None:
    drawn = {s["x"] for s in samples({"x": spec}, n=200)}
    assert drawn <= values
    assert len(drawn) >= 3


def test_qloguniform_prefers_small_values() -> None:
    drawn = [s["x"] for s in samples({"x": {"_type": "qloguniform", "_value": [1, 1000, 1]}})]
    assert sum(x < 32 for x in drawn) / len(drawn) > 0.35  # uniform would give about 3%


def test_normal_types_follow_their_distribution() -> None:
    drawn = samples(
        {
            "n": {"_type": "normal", "_value": [10, 2]},
            "qn": {"_type": "qnormal", "_value": [0, 3, 0.5]},
            "ln": {"_type": "lognormal", "_value": [0, 0.5]},
            "qln": {"_type": "qlognormal", "_value": [2, 0.3, 1]},
        },
        n=400,
    )
    normal = [s["n"] for s in drawn]
    assert abs(statistics.mean(normal) - 10) < 0.4
    assert 1.6 < statistics.stdev(normal) < 2.4
    assert all(abs(s["qn"] / 0.5 - round(s["qn"] / 0.5)) < 1e-9 for s in drawn)
    assert all(s["ln"] > 0 for s in drawn)
    assert abs(statistics.median(math.log(s["ln"]) for s in drawn)) < 0.1
    assert all(float(s["qln"]).is_integer() for s in drawn)


def test_decode_maps_the_middle_quantile_to_mu() -> None:
    space = SearchSpace.parse(
        {"n": {"_type": "normal", "_value": [3, 2]}, "l": {"_type": "lognormal", "_value": [1, 2]}}
    )
    normal, lognormal = space.params
    assert encoding.decode(normal, 0.5) == pytest.approx(3)
    assert encoding.decode(lognormal, 0.5) == pytest.approx(math.e)
    assert encoding.decode(normal, encoding.QUANTILE_HIGH) == pytest.approx(3 + 4 * 2)


def test_nested_choice_yields_nni_shaped_params() -> None:
    drawn = samples(NESTED, n=60)
    shapes = {s["layer"]["_name"]: set(s["layer"]) for s in drawn}
    assert shapes == {"empty": {"_name"}, "conv": {"_name", "kernel"}, "pool": {"_name", "kernel"}}
    assert all(s["layer"]["kernel"] in (1, 3, 5) for s in drawn if s["layer"]["_name"] == "conv")
    assert all(s["layer"]["kernel"] in (2, 3) for s in drawn if s["layer"]["_name"] == "pool")


def test_choice_values_keep_their_types() -> None:
    drawn = samples({"c": {"_type": "choice", "_value": ["x", 2, 3.5, True, None]}}, n=80)
    assert {repr(s["c"]) for s in drawn} == {"'x'", "2", "3.5", "True", "None"}


def test_importing_the_pure_modules_does_not_import_optuna() -> None:
    code = (
        "import sys, kubelab, kubelab.sweeps.space, kubelab.sweeps.sweep_spec, kubelab.formats.nni_config; "
        "print('optuna' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
