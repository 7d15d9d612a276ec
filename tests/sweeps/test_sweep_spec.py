"""The sweep spec, per-trial specs and commands, and NNI config conversion."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from kubelab.errors import ValidationError
from kubelab.formats.nni_config import load_nni_config, nni_to_sweep
from kubelab.sweeps.space import Scalar
from kubelab.sweeps.sweep_spec import SweepSpec, trial_command

SPACE = {
    "lr": {"_type": "loguniform", "_value": [1e-4, 0.1]},
    "opt": {"_type": "choice", "_value": ["sgd", "adam"]},
}


def sweep(**changes: Any) -> dict[str, Any]:
    data = {
        "name": "mnist",
        "space": SPACE,
        "tuner": {"name": "tpe", "args": {"seed": 1}},
        "objective": {"metric": "loss", "direction": "minimize"},
        "max_trials": 10,
        "concurrency": 2,
        "trial": {"command": ["python", "train.py"]},
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def problems(data: object, **kwargs: Any) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        SweepSpec.parse(data, **kwargs)
    return {f.path: f.reason for f in info.value.fields}


def test_a_valid_sweep_parses_and_round_trips() -> None:
    spec = SweepSpec.parse(sweep(early_stopping="median", max_duration="2h", max_failed_trials=3))
    assert (spec.tuner.name, spec.early_stopping.name) == ("tpe", "median")
    assert (spec.objective.metric, spec.max_duration, spec.concurrency) == ("loss", 7200.0, 2)
    again = SweepSpec.parse(json.loads(json.dumps(spec.to_dict())))
    assert again.to_dict() == spec.to_dict()


def test_defaults_and_string_forms() -> None:
    spec = SweepSpec.parse(
        {"space": SPACE, "tuner": "random", "max_trials": 3, "trial": {"command": "python t.py"}}
    )
    assert spec.objective.metric == "default"
    assert spec.objective.direction == "minimize"
    assert spec.parameter_style == "all"
    assert spec.concurrency == 1


def test_trial_command_appends_quoted_arguments() -> None:
    params: dict[str, Scalar] = {"lr": 0.001, "name": "a b; rm -rf ~", "flag": True, "none": None}
    assert trial_command(["python", "t.py"], params) == [
        "python", "t.py", "--lr=0.001", "--name=a b; rm -rf ~", "--flag=true", "--none=",
    ]  # fmt: skip
    line = trial_command("python t.py", params)
    assert isinstance(line, str)
    assert shlex.split(line) == [
        "python",
        "t.py",
        "--lr=0.001",
        "--name=a b; rm -rf ~",
        "--flag=true",
        "--none=",
    ]
    assert trial_command("python t.py", {}) == "python t.py"


def test_trial_spec_carries_params_as_arguments_env_and_template() -> None:
    spec = SweepSpec.parse(sweep(trial={"command": "python t.py --rate {{ lr }}", "env": {"A": "1"}}))
    trial = spec.trial_spec({"lr": 0.01, "opt": "adam"})
    assert trial.params == {"lr": 0.01, "opt": "adam"}
    assert trial.rendered_command() == ["/bin/sh", "-c", "python t.py --rate 0.01 --lr=0.01 --opt=adam"]
    env_only = SweepSpec.parse(sweep(parameter_style="env", trial={"command": ["python", "t.py"]}))
    assert env_only.trial_spec({"lr": 0.01, "opt": "sgd"}).rendered_command() == ["python", "t.py"]


def test_space_names_are_defined_template_variables_but_others_are_not() -> None:
    SweepSpec.parse(sweep(trial={"command": "python t.py --lr {{ lr }} --opt {{opt}}"}))
    found = problems(sweep(trial={"command": "python t.py --lr {{ lr }} --wd {{ wd }}"}))
    assert found == {"trial.command": "undefined template variable 'wd'"}


def test_space_file_is_read_relative_to_the_base_dir(tmp_path: Path) -> None:
    (tmp_path / "space.yaml").write_text("lr: {_type: uniform, _value: [0, 1]}\n")
    spec = SweepSpec.parse(sweep(space=None, space_file="space.yaml"), base_dir=tmp_path)
    assert spec.space_file == str(tmp_path / "space.yaml")
    assert SweepSpec.parse(spec.to_dict()).space.to_dict() == {"lr": {"_type": "uniform", "_value": [0, 1]}}
    (tmp_path / "bad.json").write_text('{"lr": {"_type": "uniform", "_value": [1, 0]}}')
    found = problems(sweep(space=None, space_file="bad.json"), base_dir=tmp_path)
    assert "low (1) must not be above high (0)" in found["space_file.lr._value"]
    assert (
        "no such file" in problems(sweep(space=None, space_file="nope.json"), base_dir=tmp_path)["space_file"]
    )


BAD = [
    (sweep(max_trial=3), "max_trial", "did you mean 'max_trials'?"),
    (sweep(space_file="s.json"), "space", "exactly one of space"),
    (sweep(space=None), "space", "exactly one of space"),
    (sweep(space={"lr": {"_type": "uniform", "_value": [0]}}), "space.lr._value", "takes 2 numbers"),
    (sweep(tuner="tpee"), "tuner", "did you mean 'tpe'?"),
    (sweep(tuner={"name": "tpe", "args": {"seeed": 1}}), "tuner.args.seeed", "did you mean 'seed'?"),
    (
        sweep(tuner="grid", space={"l": {"_type": "choice", "_value": [
            {"_name": "a", "w": {"_type": "uniform", "_value": [0, 1]}}]}}),
        "space.l._value[0].w",
        "grid cannot search 'w' inside a nested choice: uniform has no finite list of values",
    ),
    (sweep(early_stopping="Curvefitting"), "early_stopping", "no Optuna equivalent"),
    (sweep(objective={"metric": "loss", "direction": "down"}), "objective.direction", "minimize or maximize"),
    (sweep(objective={"metrc": "loss"}), "objective.metrc", "did you mean 'metric'?"),
    (sweep(objective={"metric": ""}), "objective.metric", "metric name"),
    (sweep(objective="loss"), "objective", "must be a mapping"),
    (sweep(max_trials=0), "max_trials", "at least 1"),
    (sweep(concurrency="2"), "concurrency", "whole number"),
    (sweep(max_failed_trials=-1), "max_failed_trials", "at least 0"),
    (sweep(max_duration="soon"), "max_duration", "not a duration"),
    (sweep(parameter_style="argz"), "parameter_style", "must be all"),
    (sweep(name=5), "name", "must be a string"),
    (sweep(trial=None), "trial", "is required"),
    (sweep(trial={"image": "x"}), "trial.command", "is required"),
    (sweep(trial={"command": ["t"], "gpus": 1}), "trial.gpus", "unknown field"),
    (sweep(trial={"command": ["t"], "params": {"lr": 0.1}}), "trial.params.lr", "is also a search-space parameter"),
    (sweep(max_trials=None), "max_trials", "set max_trials or max_duration"),
    (sweep(batch=[{"lr": 0.1}]), "batch", "only for the batch tuner"),
    (sweep(tuner={"name": "tpe", "args": {"optimize_mode": "maximize"}}), "tuner.args.optimize_mode",
     "says maximize but objective.direction is minimize"),
    (sweep(early_stopping={"name": "median", "args": {"optimize_mode": "maximize"}}),
     "early_stopping.args.optimize_mode", "says maximize"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "path", "reason"), BAD)
def test_bad_sweep_names_the_field(data: object, path: str, reason: str) -> None:
    found = problems(data)
    assert path in found, found
    assert reason in found[path]


def test_not_a_mapping() -> None:
    assert "must be a mapping" in problems(["x"])[""]


def test_trial_inputs_must_accept_the_space_values() -> None:
    trial = {"command": ["t"], "inputs": [{"name": "lr", "type": "int"}, {"name": "opt", "type": "str"}]}
    found = problems(sweep(trial=trial))
    assert "values of search-space parameter 'lr' do not fit the trial's input" in found["trial.inputs (lr)"]


def test_batch_sweep() -> None:
    configs = [{"lr": 0.1, "opt": "sgd"}, {"lr": 0.01, "opt": "adam"}]
    spec = SweepSpec.parse(sweep(space=None, tuner="batch", batch=configs, max_trials=None,
                                 trial={"command": "t --lr {{ lr }}"}))  # fmt: skip
    assert spec.batch == configs
    tuner = spec.make_tuner()
    assert [tuner.ask().params for _ in configs] == configs
    assert SweepSpec.parse(spec.to_dict()).batch == configs
    assert "leave it out" in problems(sweep(tuner="batch", batch=configs))["space"]
    assert "non-empty list" in problems(sweep(space=None, tuner="batch"))["batch"]


def test_make_tuner_uses_the_objective_and_early_stopping(tmp_path: Path) -> None:
    spec = SweepSpec.parse(sweep(objective={"direction": "maximize"}, early_stopping="asha"))
    tuner = spec.make_tuner(storage=f"sqlite:///{tmp_path}/s.db", study_name="mnist")
    assert tuner.direction == "maximize"
    suggestion = tuner.ask()
    assert spec.trial_spec(suggestion.flat).params == suggestion.flat


# -- NNI configs ----------------------------------------------------------------------------

NNI_YAML = """\
experimentName: mnist
searchSpaceFile: search_space.json
trialCommand: python3 mnist.py
trialCodeDirectory: code
trialGpuNumber: 1
trialConcurrency: 2
maxTrialNumber: 10
maxExperimentDuration: 1h
max_trial_duration: 30m
nniManagerIp: 10.0.0.1
tuner:
  name: TPE
  classArgs:
    optimize_mode: maximize
assessor:
  name: Medianstop
  classArgs:
    optimize_mode: maximize
    start_step: 5
trainingService:
  platform: local
  useActiveGpu: false
"""


def nni_dir(tmp_path: Path, config: str = NNI_YAML, space: dict[str, Any] | None = None) -> Path:
    (tmp_path / "code").mkdir()
    (tmp_path / "search_space.json").write_text(json.dumps(space or SPACE))
    (tmp_path / "config.yml").write_text(config)
    return tmp_path / "config.yml"


def test_nni_config_with_a_search_space_file(tmp_path: Path) -> None:
    converted = load_nni_config(nni_dir(tmp_path))
    code = str((tmp_path / "code").resolve())
    assert converted["space_file"] == str((tmp_path / "search_space.json").resolve())
    assert converted["trial"] == {
        "command": "python3 mnist.py",
        "workdir": code,
        "code": {"path": code},
        "resources": {"gpus": 1},
        "timeout": "30m",
    }
    spec = SweepSpec.parse(converted)
    assert (spec.tuner.name, spec.early_stopping.name) == ("tpe", "median")
    assert spec.early_stopping.kwargs == {"n_warmup_steps": 5}
    assert (spec.objective.metric, spec.objective.direction) == ("default", "maximize")
    assert (spec.max_trials, spec.concurrency, spec.max_duration) == (10, 2, 3600.0)
    assert spec.parameter_style == "env"
    assert spec.trial_spec({"lr": 0.01, "opt": "sgd"}).rendered_command() == [
        "/bin/sh",
        "-c",
        "python3 mnist.py",
    ]
    assert spec.space.to_dict() == SPACE


def test_nni_hyperband_and_bohb_advisors(tmp_path: Path) -> None:
    base = {"searchSpace": SPACE, "trialCommand": "python t.py", "trialConcurrency": 1, "maxTrialNumber": 5}
    hyper = nni_to_sweep(
        {
            **base,
            "advisor": {"name": "Hyperband", "classArgs": {"R": 27, "eta": 3, "exec_mode": "parallelism"}},
        }
    )
    assert hyper["tuner"]["name"] == "random"
    assert SweepSpec.parse(hyper).early_stopping.kwargs == {"max_resource": 27, "reduction_factor": 3}
    bohb = nni_to_sweep(
        {**base, "advisor": {"name": "BOHB", "classArgs": {"min_budget": 1, "max_budget": 9}}}
    )
    assert SweepSpec.parse(bohb).tuner.name == "tpe"
    with pytest.raises(ValidationError, match="advisor.classArgs.top_n_percent"):
        nni_to_sweep({**base, "advisor": {"name": "BOHB", "classArgs": {"top_n_percent": 15}}})


def test_nni_batch_tuner(tmp_path: Path) -> None:
    configs = [{"lr": 0.1}, {"lr": 0.01}]
    space = {"combine_params": {"_type": "choice", "_value": configs}}
    path = nni_dir(tmp_path, NNI_YAML.replace("name: TPE", "name: BatchTuner").split("assessor:")[0], space)
    spec = SweepSpec.parse(load_nni_config(path))
    assert spec.tuner.name == "batch"
    assert spec.batch == configs
    with pytest.raises(ValidationError, match="BatchTuner expects"):
        nni_to_sweep({"searchSpace": SPACE, "trialCommand": "t", "tuner": {"name": "BatchTuner"}})


NNI_BAD = [
    ({"trialComand": "t"}, "trialComand", "did you mean 'trialCommand'?"),
    ({"useAnnotation": True}, "useAnnotation", "annotations are not supported"),
    ({"experimentType": "nas"}, "experimentType", "only hpo"),
    ({"trainingService": {"platform": "remote"}}, "trainingService.platform", "must be local"),
    ({"trainingService": [{"platform": "local"}, {"platform": "aml"}]}, "trainingService[1].platform",
     "must be local"),
    ({"tuner": {"name": "Mine", "codeDirectory": "x", "className": "T"}}, "tuner.codeDirectory", "custom NNI"),
    ({"tuner": {"name": "TPE", "classArg": {}}}, "tuner.classArg", "did you mean 'classArgs'?"),
    ({"tuner": {"classArgs": {}}}, "tuner.name", "is required"),
    ({"tuner": "TPE"}, "tuner", "must be a mapping"),
    ({"tuner": None}, "tuner", "is required"),
    ({"advisor": {"name": "Hyperband"}}, "advisor", "not both"),
    ({"searchSpaceFile": "s.json"}, "searchSpaceFile", "exactly one of"),
    ({"trialCommand": None}, "trialCommand", "is required"),
    ({"trialCodeDirectory": 3}, "trialCodeDirectory", "directory path"),
    ({"assessor": {"name": "Medianstop", "classArgs": {"optimize_mode": "minimize"}}},
     "tuner.classArgs.optimize_mode", "optimize_mode values disagree"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "path", "reason"), NNI_BAD)
def test_bad_nni_configs(change: dict[str, Any], path: str, reason: str) -> None:
    data = {"searchSpace": SPACE, "trialCommand": "python t.py", "trialConcurrency": 1, "maxTrialNumber": 3,
            "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "maximize"}}}  # fmt: skip
    data.update(change)
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ValidationError) as info:
        nni_to_sweep(data, base_dir="/tmp")
    found = {f.path: f.reason for f in info.value.fields}
    assert path in found, found
    assert reason in found[path]


def test_nni_keys_ignore_case_and_underscores_and_errors_surface_in_the_sweep() -> None:
    converted = nni_to_sweep(
        {"search_space": SPACE, "TRIAL_COMMAND": "t", "trial_concurrency": 1, "max_trial_number": 2,
         "tuner": {"name": "Anneal"}, "assessor": {"name": "Curvefitting", "classArgs": {"epoch_num": 20}}},
    )  # fmt: skip
    assert converted["tuner"]["name"] == "Anneal"
    with pytest.raises(ValidationError, match="Curvefitting has no Optuna equivalent"):
        SweepSpec.parse(converted)
    with pytest.raises(ValidationError, match="must be a mapping"):
        nni_to_sweep(["x"])
