"""Polyaxon files run as they are: v0 experiments and groups, v1 components and operations
(jobs, pytorchjobs, tfjobs, matrices); what has no kubelab equivalent is refused by name."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from sweeps.sweep_support import wait_sweep

from kubelab.errors import ValidationError
from kubelab.formats import experiment_mapping, load_spec_file, sweep_mapping
from kubelab.formats.polyaxon_v0 import sanitize_cmd
from kubelab.formats.specfile import load_document
from kubelab.spec import ExperimentSpec
from kubelab.sweeps.service import Sweeps
from kubelab.sweeps.sweep_spec import SweepSpec

FIXTURES = Path(__file__).parent / "fixtures"
POLYAXON = FIXTURES / "polyaxon"


def refusal(call: Callable[[], object]) -> dict[str, str]:
    with pytest.raises(ValidationError) as refused:
        call()
    return {f.path: f.reason for f in refused.value.fields}


def experiment(data: dict[str, Any]) -> dict[str, Any]:
    return experiment_mapping(data, POLYAXON)


def sweep(data: dict[str, Any]) -> dict[str, Any]:
    mapped: dict[str, Any] = sweep_mapping(data, POLYAXON)
    return mapped


# -- v0 ------------------------------------------------------------------------------------


def test_v0_backslash_continuations_run_as_polyaxon_runs_them(
    cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    assert sanitize_cmd("python a.py \\ --x=1 \\  --y=2") == "python a.py --x=1 --y=2"
    assert sanitize_cmd(["pip install -r r.txt", "python a.py \\\n --x=1"]) == (
        "pip install -r r.txt && python a.py --x=1"
    )
    done = cli("run", "-f", "polyaxon/v0_continuation.yml", "--wait")
    assert '["--lr=0.01", "--epochs=2", "--name=first"]' in done.stdout


def test_v0_workers_and_parameter_servers_become_replicas() -> None:
    spec = ExperimentSpec.parse(load_spec_file(POLYAXON / "v0_distributed.yml"))
    assert (spec.framework, spec.replicas, spec.parameter_servers) == ("tensorflow", 4, 1)
    data = load_document(POLYAXON / "v0_distributed.yml")
    data["framework"] = "horovod"
    assert "MPI launcher" in refusal(lambda: experiment(data))["framework"]
    data["framework"] = "pytorch"
    data["environment"]["replicas"]["default_worker"] = {"resources": {"gpu": {"limits": 1}}}
    found = refusal(lambda: experiment(data))
    assert "every replica gets the master's resources" in found["environment.replicas.default_worker"]
    data["environment"]["replicas"].pop("default_worker")
    assert (
        "only for framework tensorflow"
        in refusal(lambda: ExperimentSpec.parse(experiment(data)))["parameter_servers"]
    )


def test_v0_pip_build_steps_are_the_environment_and_system_steps_are_refused_by_name() -> None:
    data = load_document(POLYAXON / "v0_build_steps.yml")
    assert experiment(data)["environment"] == {"requirements": ["requirements.txt"]}
    data["build"]["build_steps"] = ["apt-get update && apt-get install -y libgl1", "pip install numpy"]
    assert "apt-get installs system packages" in refusal(lambda: experiment(data))["build.build_steps[0]"]
    data["build"] = {"dockerfile": "Dockerfile"}
    assert "not images" in refusal(lambda: experiment(data))["build.dockerfile"]


def test_v0_group_is_a_sweep_for_run_and_sweep(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweeps: Sweeps
) -> None:
    """A random search with metric early stopping: the first trial below 0.05 ends the sweep."""
    mapping = sweep(load_document(POLYAXON / "v0_group.yml"))
    spec = SweepSpec.parse(mapping, POLYAXON)
    assert spec.space.to_dict()["lr"] == {"_type": "choice", "_value": [0.001, 0.01, 0.1]}
    assert spec.space.to_dict()["dropout"] == {"_type": "uniform", "_value": [0, 0.5]}
    assert (spec.tuner.name, spec.tuner.seed, spec.max_trials, spec.concurrency) == ("random", 7, 4, 2)
    assert (spec.objective.metric, spec.stop_at) == ("loss", 0.05)
    done = cli("run", "-f", "polyaxon/v0_group.yml", "--wait")
    assert "reached stop_at (loss=" in done.stderr, done.stderr
    sweep_id = cli("sweep", "-f", "polyaxon/v0_group.yml").stdout.strip()
    assert wait_sweep(sweeps, sweep_id)["status"] == "Succeeded"
    assert (
        "--name cannot be combined with a sweep file"
        in cli("run", "-f", "polyaxon/v0_group.yml", "--name", "x", rc=2).stderr
    )


@pytest.mark.parametrize(
    ("hptuning", "expected"),
    [
        ({"grid_search": {"n_experiments": 5}}, {"tuner": "grid", "max_trials": 5}),
        (
            {
                "hyperband": {
                    "max_iter": 9,
                    "eta": 3,
                    "resource": {"name": "epochs", "type": "int"},
                    "metric": {"name": "acc", "optimization": "maximize"},
                }
            },
            {"tuner": "random", "early_stopping": "hyperband", "max_trials": 17, "metric": "acc"},
        ),
        (
            {
                "bo": {
                    "n_iterations": 6,
                    "n_initial_trials": 3,
                    "metric": {"name": "loss", "optimization": "minimize"},
                    "utility_function": {
                        "acquisition_function": "ei",
                        "gaussian_process": {"kernel": "matern", "nu": 2.5},
                    },
                }
            },
            {"tuner": "gp", "max_trials": 9},
        ),
    ],
)
def test_v0_group_algorithms_map_onto_tuners(hptuning: dict[str, Any], expected: dict[str, Any]) -> None:
    data = load_document(POLYAXON / "v0_group.yml")
    data["hptuning"] = {"matrix": data["hptuning"]["matrix"], **hptuning}
    spec = SweepSpec.parse(sweep(data), POLYAXON)
    assert spec.tuner.name == expected["tuner"]
    assert spec.max_trials == expected["max_trials"]
    if "early_stopping" in expected:
        assert spec.early_stopping.name == "hyperband"
        assert spec.trial["params"] == {"epochs": 9}  # the resource, at the largest budget
        assert spec.trial_spec({"lr": 0.1, "dropout": 0.2, "optimizer": "sgd"}).params["epochs"] == 9
        assert spec.objective.metric == expected["metric"] and spec.objective.direction == "maximize"


def test_v0_group_refusals_name_the_field() -> None:
    data = load_document(POLYAXON / "v0_group.yml")
    data["hptuning"]["matrix"]["act"] = {"pvalues": [["relu", 0.1], ["tanh", 0.9]]}
    data["hptuning"]["bo"] = {"n_iterations": 2}
    found = refusal(lambda: sweep(data))
    assert "weighted choice" in found["hptuning.matrix.act"]
    assert "give one search algorithm" in found["hptuning.bo"]
    data = load_document(POLYAXON / "v0_group.yml")
    data["hptuning"].pop("random_search")
    data["hptuning"]["hyperband"] = {
        "max_iter": 9,
        "eta": 3,
        "resource": {"name": "epochs"},
        "resume": True,
        "metric": {"name": "loss", "optimization": "minimize"},
    }
    data["hptuning"]["early_stopping"] = [{"metric": "accuracy", "value": 0.9, "optimization": "maximize"}]
    found = refusal(lambda: sweep(data))
    assert "must watch the objective (loss, minimize)" in found["hptuning.early_stopping[0].metric"]
    assert "not resumed between rungs" in found["hptuning.hyperband.resume"]


def test_v0_group_value_lists_are_computed_as_polyaxon_does() -> None:
    data = load_document(POLYAXON / "v0_group.yml")
    data["hptuning"]["matrix"] = {
        "a": {"range": "0:10:3"},
        "b": {"linspace": "1:10:4"},
        "c": {"logspace": {"start": 0, "stop": 2, "num": 3, "base": 2}},
        "d": {"geomspace": [1, 8, 4]},
        "e": {"loguniform": "0:1"},
        "f": {"normal": {"loc": 0, "scale": 2}},
    }
    space = sweep(data)["space"]
    assert space["a"]["_value"] == [0, 3, 6, 9]
    assert space["b"]["_value"] == [1.0, 4.0, 7.0, 10.0]
    assert space["c"]["_value"] == [1.0, 2.0, 4.0]
    assert space["d"]["_value"] == [1.0, 2.0, 4.0, 8.0]
    assert space["e"] == {"_type": "loguniform", "_value": [1.0, pytest.approx(2.718281828)]}
    assert space["f"] == {"_type": "normal", "_value": [0, 2]}


# -- v1 ------------------------------------------------------------------------------------


def test_v1_component_and_operation() -> None:
    component = load_spec_file(POLYAXON / "v1_component.yml")
    assert component["inputs"] == [
        {"name": "lr", "type": "float", "default": 0.01, "optional": True},
        {"name": "epochs", "type": "int"},
    ]
    assert component["command"] == ["python3", "train.py", "--lr={{ lr }}", "--epochs={{ epochs }}"]
    assert component["code"] == {"path": "."} and component["retries"] == 1
    assert "required input" in refusal(lambda: ExperimentSpec.parse(component))["params.epochs"]
    spec = ExperimentSpec.parse(load_spec_file(POLYAXON / "v1_operation.yml"))
    assert spec.name == "train-once" and spec.params == {"epochs": 3}
    assert spec.rendered_command() == ["python3", "train.py", "--lr=0.01", "--epochs=3"]
    assert spec.resources.cpu == "1" and spec.resources.memory == "1Gi"


def test_v1_pytorchjob_and_tfjob_become_replicas() -> None:
    ddp = ExperimentSpec.parse(load_spec_file(POLYAXON / "v1_pytorchjob.yml"))
    assert (ddp.framework, ddp.replicas, ddp.resources.gpus) == ("pytorch", 4, 1)
    tf = ExperimentSpec.parse(load_spec_file(POLYAXON / "v1_tfjob.yml"))
    assert (tf.framework, tf.replicas, tf.parameter_servers) == ("tensorflow", 3, 1)
    data = load_document(POLYAXON / "v1_pytorchjob.yml")
    data["run"]["worker"] = copy.deepcopy(data["run"]["worker"])
    data["run"]["worker"]["container"]["command"] = ["python", "other.py"]
    assert "must run the same container as master" in refusal(lambda: experiment(data))["run.worker"]


@pytest.mark.parametrize(
    ("change", "path", "reason"),
    [
        ({"joins": [{"query": "metrics.loss:<0.1"}]}, "joins", "not supported (left for later)"),
        ({"hubRef": "tensorboard:latest", "component": None}, "hubRef", "Polyaxon's servers"),
        ({"dagRef": "pipeline"}, "dagRef", "kubelab pipeline run -f"),
        (
            {"params": {"epochs": {"ref": "ops.train", "value": "outputs.n"}}},
            "params.epochs.ref",
            "give the value",
        ),
        ({"schedule": {"kind": "cron", "cron": "0 * * * *"}}, "schedule", "kubelab schedule add -f"),
        ({"pathRef": "../../secret.yml"}, "pathRef", "outside the operation's folder"),
        ({"pathRef": "/etc/passwd"}, "pathRef", "outside the operation's folder"),
        (
            {"pathRef": None, "component": {"run": {"kind": "dag", "operations": []}}},
            "component.run.kind",
            "kubelab pipeline run -f",
        ),
        ({"pathRef": None, "component": {"run": {"kind": "mpijob"}}}, "component.run.kind", "MPI"),
        (
            {
                "pathRef": None,
                "component": {
                    "run": {"kind": "job", "container": {"command": ["x"]}, "sidecars": [{"image": "s"}]}
                },
            },
            "component.run.sidecars",
            "not supported",
        ),
        (
            {
                "pathRef": None,
                "component": {
                    "inputs": [{"name": "d", "type": "path"}],
                    "run": {"kind": "job", "container": {"command": ["x"]}},
                },
            },
            "component.inputs[0].type",
            "int, float, str or bool",
        ),
    ],
)
def test_v1_what_kubelab_cannot_do_is_refused_by_name(change: dict[str, Any], path: str, reason: str) -> None:
    data = {**load_document(POLYAXON / "v1_operation.yml"), **change}
    found = refusal(lambda: experiment(data))
    assert reason in found.get(path, ""), found


def test_v1_dag_and_unknown_formats_say_what_they_are() -> None:
    found = refusal(lambda: experiment({"version": 1.1, "kind": "dag", "operations": []}))
    assert "pipeline" in found["kind"]
    assert "pipeline" in refusal(lambda: sweep({"version": 1.1, "kind": "dag", "operations": []}))["kind"]
    found = refusal(lambda: experiment({"version": 1.1, "kind": "cronjob"}))
    assert "kind 'cronjob' is not supported" in found["kind"]
    found = refusal(lambda: experiment({"version": 2, "kind": "thing"}))
    assert found["kind"].startswith("unknown format: version 2 with kind 'thing'")
    katib = {"apiVersion": "kubeflow.org/v1beta1", "kind": "Experiment", "spec": {}}
    assert "Katib Experiment" in refusal(lambda: experiment(katib))["kind"]
    assert "Katib Experiment" in refusal(lambda: sweep(katib))["kind"]


MATRIX_PARAMS = {
    "lr": {"kind": "choice", "value": [0.01, 0.1]},
    "epochs": {"kind": "range", "value": "1:4:1"},
}


@pytest.mark.parametrize(
    ("matrix", "tuner", "max_trials"),
    [
        ({"kind": "grid", "params": MATRIX_PARAMS}, "grid", None),
        ({"kind": "random", "numRuns": 5, "seed": 1, "params": MATRIX_PARAMS}, "random", 5),
        (
            {
                "kind": "hyperband",
                "maxIterations": 27,
                "eta": 3,
                "resource": {"name": "epochs", "type": "int"},
                "metric": {"name": "loss", "optimization": "minimize"},
                "params": {"lr": MATRIX_PARAMS["lr"]},
            },
            "random",
            49,
        ),  # brackets of 27, 12, 6 and 4 runs
        (
            {
                "kind": "bayes",
                "numInitialRuns": 2,
                "maxIterations": 3,
                "metric": {"name": "loss", "optimization": "minimize"},
                "utilityFunction": {"acquisitionFunction": "ei"},
                "params": MATRIX_PARAMS,
            },
            "gp",
            5,
        ),
        ({"kind": "hyperopt", "algorithm": "anneal", "numRuns": 4, "params": MATRIX_PARAMS}, "anneal", 4),
        ({"kind": "mapping", "values": [{"lr": 0.1, "epochs": 1}, {"lr": 0.2, "epochs": 2}]}, "batch", None),
    ],
)
def test_v1_matrix_kinds_map_onto_tuners(matrix: dict[str, Any], tuner: str, max_trials: int | None) -> None:
    data = load_document(POLYAXON / "v1_matrix.yml")
    data["matrix"] = matrix
    data["params"] = {}
    spec = SweepSpec.parse(sweep(data), POLYAXON)
    assert (spec.tuner.name, spec.max_trials) == (tuner, max_trials)
    if tuner not in ("batch", "random") or max_trials == 5:
        assert spec.space.to_dict()["epochs"] == {"_type": "choice", "_value": [1, 2, 3]}
    if matrix["kind"] == "hyperband":
        assert spec.early_stopping.kwargs["max_resource"] == 27 and spec.trial["params"] == {"epochs": 27}


def test_v1_matrix_refusals() -> None:
    data = load_document(POLYAXON / "v1_matrix.yml")
    data["matrix"] = {"kind": "iterative", "params": MATRIX_PARAMS}
    assert "custom tuner" in refusal(lambda: sweep(data))["matrix.kind"]
    data["matrix"] = {
        "kind": "bayes",
        "numInitialRuns": 2,
        "maxIterations": 3,
        "params": MATRIX_PARAMS,
        "metric": {"name": "loss"},
        "utilityFunction": {"acquisitionFunction": "ucb", "kappa": 2},
    }
    found = refusal(lambda: sweep(data))
    assert "only ei" in found["matrix.utility_function.acquisition_function"]
    assert "no equivalent" in found["matrix.utility_function.kappa"]
    data["matrix"] = {
        "kind": "random",
        "numRuns": 2,
        "params": {"d": {"kind": "pchoice", "value": [[1, 0.5]]}},
    }
    assert "weighted choice" in refusal(lambda: sweep(data))["matrix.params.d"]


def test_v1_matrix_runs_with_the_tracking_client(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweeps: Sweeps
) -> None:
    done = cli("sweep", "-f", "polyaxon/v1_matrix.yml", "--wait", "-o", "json")
    record = json.loads(done.stdout)
    assert record["status"] == "Succeeded" and len(record["trials"]) == 3
    best = record["best"]
    assert best["value"] == pytest.approx(0.001 / 2)  # lr / epochs at the last step, lr = 0.001
    runs = json.loads(cli("ls", f"sweep:{record['id']}", "-o", "json").stdout)["items"]
    assert all(r["metrics"]["epochs"] == 2 and r["params"]["epochs"] == 2 for r in runs)


def test_yaml_keeps_polyaxon_ranges_as_text(tmp_path: Path) -> None:
    (tmp_path / "f.yml").write_text("a: 1:10:5\nb: 0:1\nc: 1.5\n")
    assert load_document(tmp_path / "f.yml") == {"a": "1:10:5", "b": "0:1", "c": 1.5}
    assert yaml.safe_load("a: 1:10:5") == {"a": 4205}  # what YAML 1.1 would have made of it
