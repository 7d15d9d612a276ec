"""The experiment spec: every entry point's one model, and its refusals."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubelab.errors import ValidationError
from kubelab.formats.polyaxon_v0 import convert
from kubelab.quantity import parse_duration, parse_quantity
from kubelab.spec import ExperimentSpec


def problems(data: object) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        ExperimentSpec.parse(data)
    return {f.path: f.reason for f in caught.value.fields}


def test_full_spec_round_trips() -> None:
    data = {
        "name": "resnet",
        "command": "python train.py --lr={{ lr }} --opt {{ opt }}",
        "inputs": [
            {"name": "lr", "type": "float", "default": 0.1},
            {"name": "opt", "type": "str", "choices": ["sgd", "adam"], "default": "sgd"},
            {"name": "epochs", "type": "int", "optional": True},
        ],
        "params": {"lr": "0.01"},
        "resources": {"cpu": "500m", "memory": "4Gi", "gpus": 2, "gpu_type": "A100", "shm": "1G"},
        "replicas": 2,
        "framework": "pytorch",
        "env": {"A": 1, "B": True},
        "node_selector": {"org": "public"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "retries": 2,
        "timeout": "1h30m",
        "tags": "a, b",
        "description": "d",
    }
    spec = ExperimentSpec.parse(data)
    assert spec.params == {"lr": 0.01}
    assert spec.resolved_params() == {"lr": 0.01, "opt": "sgd"}
    assert spec.timeout == 5400
    assert spec.env == {"A": "1", "B": "true"}
    assert spec.tags == ["a", "b"]
    assert ExperimentSpec.parse(spec.to_dict()) == spec


def test_template_values_are_shell_quoted() -> None:
    spec = ExperimentSpec.parse({"command": "echo {{ x }}", "params": {"x": "a b; rm -rf ~"}})
    assert spec.rendered_command() == ["/bin/sh", "-c", "echo 'a b; rm -rf ~'"]
    listed = ExperimentSpec.parse({"command": ["echo", "{{x}}"], "params": {"x": "a b"}})
    assert listed.rendered_command() == ["echo", "a b"]


@pytest.mark.parametrize(
    ("data", "path", "reason"),
    [
        ({"command": "x", "gpu": 1}, "gpu", "did you mean 'resources.gpus'"),
        ({"command": "x", "nmae": "a"}, "nmae", "did you mean 'name'"),
        ({"command": "x", "resources": {"gpus": -1}}, "resources.gpus", "0 or more"),
        ({"command": "x", "resources": {"gpus": 1.5}}, "resources.gpus", "whole number"),
        ({"command": "x", "resources": {"gpus": 0.3}}, "resources.gpus", "1/n of one GPU"),
        (
            {"command": "x", "resources": {"gpus": 0.5}, "replicas": 2, "framework": "pytorch"},
            "resources.gpus",
            "one-process runs",
        ),
        ({"command": "x", "resources": {"memory": "4GG"}}, "resources.memory", "not a Kubernetes quantity"),
        ({"command": "x", "resources": {"cpu": 0}}, "resources.cpu", "more than zero"),
        ({"command": "x", "resources": {"gpu_typ": "A"}}, "resources.gpu_typ", "did you mean 'gpu_type'"),
        ({"command": "echo {{ lr }}"}, "command", "undefined template variable 'lr'"),
        ({"command": "x", "inputs": [{"name": "lr", "type": "float"}]}, "params.lr", "required input"),
        (
            {"command": "x", "inputs": [{"name": "lr", "type": "float"}], "params": {"lr": "fast"}},
            "params.lr",
            "type float",
        ),
        (
            {"command": "x", "inputs": [{"name": "o", "choices": ["a"]}], "params": {"o": "b"}},
            "params.o",
            "one of",
        ),
        (
            {"command": "x", "inputs": [{"name": "lr", "type": "float", "default": 1}], "params": {"l": 1}},
            "params.l",
            "did you mean 'lr'",
        ),
        (
            {"command": "x", "inputs": [{"name": "a"}, {"name": "a"}], "params": {"a": 1}},
            "inputs[1].name",
            "declared twice",
        ),
        (
            {"command": "x", "inputs": [{"name": "a", "type": "complex"}]},
            "inputs[0].type",
            "int, float, str, bool",
        ),
        (  # found by the REST fuzzer once the OpenAPI schema described inputs
            {"command": "x", "inputs": [{"name": "a", "type": {}}]},
            "inputs[0].type",
            "int, float, str, bool",
        ),
        ({"command": "x", "framework": "torch"}, "framework", "did you mean 'pytorch'"),
        ({"command": "x", "replicas": 0}, "replicas", "at least 1"),
        ({"command": "x", "replicas": 2}, "framework", "needs a framework"),
        ({"command": "x", "timeout": "soon"}, "timeout", "not a duration"),
        ({"command": "x", "retries": -1}, "retries", "at least 0"),
        ({"command": "x", "env": ["A=1"]}, "env", "mapping"),
        ({"command": 5}, "command", "list of arguments"),
        ({}, "command", "is required"),
        ({"command": "x", "code": {"path": "a", "source": "b"}}, "code", "exactly one"),
        (
            {"command": "x", "code": {"source": "b", "filename": "../x.py"}},
            "code.filename",
            "plain file name",
        ),
        (
            {"command": "x", "tolerations": [{"operator": "Maybe"}]},
            "tolerations[0].operator",
            "Equal or Exists",
        ),
        (
            {"command": "x", "parameter_servers": 1, "framework": "pytorch", "replicas": 2},
            "parameter_servers",
            "tensorflow",
        ),
        ({"command": "x", "resources": {"gpu_type": "A100"}}, "resources.gpu_type", "gpus is 0"),
    ],
)
def test_bad_specs_name_the_field_and_reason(data: dict[str, Any], path: str, reason: str) -> None:
    found = problems(data)
    assert path in found, found
    assert reason in found[path]


def test_every_problem_is_listed_at_once() -> None:
    found = problems({"nme": "x", "command": "echo {{ y }}", "resources": {"gpus": -2, "cpu": "lots"}})
    assert set(found) == {"nme", "command", "resources.gpus", "resources.cpu"}


def test_not_a_mapping() -> None:
    assert problems(["python"]) == {"": "the spec must be a mapping of fields"}


def test_quantities_and_durations() -> None:
    assert parse_quantity("500m") == parse_quantity(0.5)
    assert parse_quantity("4Gi") == 4 * 2**30
    assert parse_quantity("1e3") == 1000
    bad: object
    for bad in ("", "4 Gi", "-1", "Gi", True, [1]):
        with pytest.raises(ValueError):
            parse_quantity(cast(Any, bad))
    assert parse_duration("1h30m") == 5400 and parse_duration("90s") == 90 and parse_duration(10) == 10
    for bad in ("", "1x", 0, -5, False):
        with pytest.raises(ValueError):
            parse_duration(cast(Any, bad))


def test_polyaxonfile_runs_as_is() -> None:
    polyaxonfile = {
        "version": 1,
        "kind": "experiment",
        "tags": ["examples"],
        "inputs": [{"name": "lr", "type": "float", "is_optional": True, "default": 0.1}],
        "environment": {
            "resources": {
                "cpu": {"requests": 1, "limits": 2},
                "memory": {"requests": 512, "limits": 1024},
                "gpu": {"requests": 1, "limits": 1},
            },
            "node_selector": {"org": "public"},
            "pytorch": {"n_workers": 1},
        },
        "build": {"image": "pytorch/pytorch:latest"},
        "run": {"cmd": "python train.py --lr={{ lr }}"},
    }
    spec = ExperimentSpec.parse(convert(polyaxonfile))
    assert spec.resources.gpus == 1 and spec.resources.memory == "1024Mi" and spec.resources.cpu == "2"
    assert spec.image == "pytorch/pytorch:latest" and spec.framework == "pytorch" and spec.replicas == 2
    assert spec.rendered_command()[-1] == "python train.py --lr=0.1"


def test_polyaxonfile_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        convert({"version": 1, "kind": "experiment", "enviroment": {}, "run": {"cmd": "x"}})
    assert caught.value.fields[0].path == "enviroment"
    assert "did you mean 'environment'" in caught.value.fields[0].reason
