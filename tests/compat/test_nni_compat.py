"""NNI users move over without editing: configs (v2 and v1), Hyperband's TRIAL_BUDGET, the
local training service's settings and NNI's Python API (`nni.experiment.Experiment`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sweeps.sweep_support import wait_sweep

from kubelab.errors import ValidationError
from kubelab.formats.nni_config import load_nni_config, nni_to_sweep
from kubelab.shims import SHIMS
from kubelab.sweeps.service import Sweeps
from kubelab.sweeps.sweep_spec import SweepSpec

T = TypeVar("T")

FIXTURES = Path(__file__).parent / "fixtures"


def wait_for(predicate: Callable[[], T | None], timeout: float = 90.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_quickstart_config_without_limits_runs_until_stopped(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweeps: Sweeps, compat_env: Path
) -> None:
    """NNI's quickstart has no maxTrialNumber: it keeps suggesting trials until `sweep stop`."""
    sweep_id = cli("sweep", "-f", "nni_quickstart/config.yml").stdout.strip()
    record = sweeps.get(sweep_id)
    assert record["max_trials"] is None and record["status"] == "Running"
    # more trials finish than the concurrency (2) and nothing ends the sweep on its own
    wait_for(lambda: sweeps.get(sweep_id)["counts"]["succeeded"] >= 5, what="5 succeeded trials")
    assert sweeps.get(sweep_id)["status"] == "Running"
    stopped = cli("sweep", "stop", sweep_id, "-o", "json").stdout
    assert json.loads(stopped)["status"] == "Stopped"
    final = wait_sweep(sweeps, sweep_id)
    assert final["status"] == "Stopped"
    assert final["best"]["value"] > 0  # the trials' nni.report_final_result values were read


def test_a_kubelab_spec_still_needs_a_limit_or_until_stopped() -> None:
    spec = {"space": {"x": {"_type": "uniform", "_value": [0, 1]}}, "trial": {"command": "true"}}
    with pytest.raises(ValidationError) as refused:
        SweepSpec.parse(spec)
    assert "until_stopped: true" in refused.value.message()
    assert SweepSpec.parse({**spec, "until_stopped": True}).max_trials is None


def test_v1_config_is_converted_as_nni_3_converts_it() -> None:
    converted = load_nni_config(FIXTURES / "nni_v1_config.yml")
    code = str((FIXTURES / "nni_quickstart").resolve())
    assert converted["tuner"] == {"name": "TPE", "args": {}}
    assert converted["early_stopping"] == {"name": "Medianstop", "args": {"start_step": 2}}
    assert converted["objective"] == {"metric": "default", "direction": "maximize"}
    assert (converted["max_trials"], converted["max_duration"], converted["concurrency"]) == (4, "1h", 1)
    assert converted["space_file"] == str(FIXTURES / "nni_quickstart" / "search_space.json")
    assert converted["trial"] == {"command": "python3 model.py", "workdir": code, "code": {"path": code}}
    SweepSpec.parse(converted)


def test_v1_remote_platforms_and_custom_tuners_are_refused_by_name() -> None:
    config = {
        "authorName": "me",
        "trialConcurrency": 1,
        "trainingServicePlatform": "remote",
        "machineList": [{"ip": "10.0.0.1"}],
        "searchSpacePath": "s.json",
        "tuner": {"codeDir": ".", "classFileName": "t.py", "className": "T"},
        "trial": {"command": "python t.py", "codeDir": ".", "image": "x"},
    }
    with pytest.raises(ValidationError) as refused:
        nni_to_sweep(config)
    fields = {f.path: f.reason for f in refused.value.fields}
    assert "remote NNI training services are not supported" in fields["machineList"]
    assert "custom NNI algorithms" in fields["tuner.codeDir"]
    assert "remote NNI training service" in fields["trial.image"]


@pytest.mark.parametrize(
    ("settings", "path", "reason"),
    [
        ({"maxTrialNumberPerGpu": 0}, "trainingService.maxTrialNumberPerGpu", "at least 1"),
        ({"gpuIndices": "0,x"}, "trainingService.gpuIndices", "must list GPU indices (0, 1, ...), not 'x'"),
        ({"gpuIndices": [-1]}, "trainingService.gpuIndices", "must list GPU indices"),
        ({"reuseMode": True}, "trainingService.reuseMode", "fresh processes"),
        ({"useActiveGpu": "no"}, "trainingService.useActiveGpu", "must be true or false"),
        ({"useActivGpu": True}, "trainingService.useActivGpu", "did you mean 'useActiveGpu'"),
    ],
)
def test_local_training_service_settings_are_refused_by_name(
    settings: dict[str, Any], path: str, reason: str
) -> None:
    config = {
        "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "trialCommand": "true",
        "tuner": {"name": "TPE"},
        "trainingService": {"platform": "local", **settings},
    }
    with pytest.raises(ValidationError) as refused:
        nni_to_sweep(config)
    assert any(f.path == path and reason in f.reason for f in refused.value.fields), refused.value.message()


def test_trials_per_gpu_shares_a_gpu_and_gpu_indices_pick_the_gpus() -> None:
    config = {
        "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
        "trialCommand": "true",
        "trialGpuNumber": 1,
        "maxTrialNumber": 4,
        "tuner": {"name": "TPE"},
        "trainingService": {"platform": "local", "maxTrialNumberPerGpu": 2, "gpuIndices": "1,2"},
    }
    spec = SweepSpec.parse(nni_to_sweep(config))
    assert spec.trials_per_gpu == 2
    trial = spec.trial_spec({"x": 0.5})
    assert trial.resources.gpus == 0.5 and trial.resources.gpu_indices == [1, 2]
    assert SweepSpec.parse(spec.to_dict()).trial_spec({"x": 0.5}).resources.gpus == 0.5  # round trip
    with pytest.raises(ValidationError) as refused:
        nni_to_sweep({**config, "trialGpuNumber": 2})
    [problem] = refused.value.fields
    assert (
        problem.path == "trainingService.maxTrialNumberPerGpu"
        and "trialGpuNumber must be 1" in problem.reason
    )


def test_local_training_service_settings_kubelab_honours_are_accepted() -> None:
    for settings in (
        {"useActiveGpu": True},
        {"useActiveGpu": False, "maxTrialNumberPerGpu": 1},
        {"maxTrialNumberPerGpu": 4, "gpuIndices": [0]},
        {"reuseMode": False},
    ):
        config = {
            "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "trialCommand": "true",
            "trialGpuNumber": 1,
            "maxTrialNumber": 1,
            "tuner": {"name": "TPE"},
            "trainingService": {"platform": "local", **settings},
        }
        SweepSpec.parse(nni_to_sweep(config))


def test_hyperband_trials_read_trial_budget(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweeps: Sweeps, compat_env: Path
) -> None:
    """NNI's Hyperband adds TRIAL_BUDGET to every trial's parameters; the trial trains that long."""
    sweep_id = cli("sweep", "-f", "nni_hyperband.yml").stdout.strip()
    wait_sweep(sweeps, sweep_id, timeout=120)
    record = sweeps.get(sweep_id)
    assert record["status"] == "Succeeded", record
    assert [t["objective"] for t in record["trials"]] == [9.0, 9.0]  # R: 9, the largest budget
    converted = nni_to_sweep(
        {
            "searchSpace": {"x": {"_type": "uniform", "_value": [0, 1]}},
            "trialCommand": "true",
            "maxTrialNumber": 1,
            "advisor": {"name": "BOHB", "classArgs": {"optimize_mode": "minimize"}},
        }
    )
    assert converted["trial"]["env"] == {"KUBELAB_NNI_TRIAL_BUDGET": "3"}  # BOHB's max_budget default
    assert converted["early_stopping"]["args"] == {"max_budget": 3, "min_budget": 1}


def test_nested_spaces_reusing_inner_names_run(compat_env: Path) -> None:
    space = {
        "layer0": {
            "_type": "choice",
            "_value": [
                {"_name": "conv", "kernel_size": {"_type": "choice", "_value": [1, 3]}},
                {"_name": "empty"},
            ],
        },
        "layer1": {
            "_type": "choice",
            "_value": [
                {"_name": "conv", "kernel_size": {"_type": "choice", "_value": [3, 5]}},
                {"_name": "empty"},
            ],
        },
        "lr": {"_type": "uniform", "_value": [0.1, 0.1]},  # equal bounds: one value, as in NNI
    }
    spec = SweepSpec.parse(
        nni_to_sweep(
            {"searchSpace": space, "trialCommand": "true", "maxTrialNumber": 2, "tuner": {"name": "Random"}}
        )
    )
    flat = spec.space.flatten(
        {
            "layer0": {"_name": "conv", "kernel_size": 3},
            "layer1": {"_name": "conv", "kernel_size": 5},
            "lr": 0.1,
        }
    )
    assert flat == {
        "layer0": "conv",
        "layer0.conv.kernel_size": 3,
        "layer1": "conv",
        "layer1.conv.kernel_size": 5,
        "lr": 0.1,
    }


EXPERIMENT_SCRIPT = textwrap.dedent("""
    import json, sys
    from nni.experiment import Experiment

    experiment = Experiment("local")
    experiment.config.experiment_name = "from-python"
    experiment.config.trial_command = "python model.py"
    experiment.config.trial_code_directory = "nni_quickstart"
    experiment.config.search_space = {"momentum": {"_type": "uniform", "_value": [0, 1]}}
    experiment.config.tuner.name = "TPE"
    experiment.config.tuner.class_args["optimize_mode"] = "maximize"
    experiment.config.trial_concurrency = 1
    experiment.config.training_service.use_active_gpu = False
    if sys.argv[1] == "run":
        experiment.config.max_trial_number = 2
        done = experiment.run(8080)
        print(json.dumps({"done": done, "status": experiment.get_status(), "id": experiment.id,
                          "results": len(experiment.export_data())}))
    else:
        experiment.start(8080)
        print(json.dumps({"id": experiment.id, "status": experiment.get_status()}), flush=True)
        sys.stdin.readline()
        experiment.stop()
        print(json.dumps({"status": experiment.get_status()}))
""")


def experiment_process(compat_env: Path, mode: str) -> subprocess.Popen[str]:
    (compat_env / "start_nni.py").write_text(EXPERIMENT_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(SHIMS)}  # as a kubelab run or `%load_ext kubelab` has it
    return subprocess.Popen(
        [sys.executable, "start_nni.py", mode],
        cwd=compat_env,
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_nni_experiment_api_run_waits_for_the_sweep(compat_env: Path, sweeps: Sweeps) -> None:
    process = experiment_process(compat_env, "run")
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result == {"done": True, "status": "DONE", "id": result["id"], "results": 2}
    assert sweeps.get(result["id"])["name"] == "from-python"


def test_nni_experiment_api_start_and_stop(compat_env: Path, sweeps: Sweeps) -> None:
    process = experiment_process(compat_env, "start")
    assert process.stdout is not None
    try:
        started = json.loads(process.stdout.readline())
        assert started["status"] == "RUNNING"
        wait_for(lambda: sweeps.get(started["id"])["counts"]["succeeded"] >= 2, what="trials")
        out, err = process.communicate("\n", timeout=60)
    finally:
        process.kill()
    assert json.loads(out.strip().splitlines()[-1]) == {"status": "STOPPED"}, err
    assert sweeps.get(started["id"])["status"] == "Stopped"


def test_nni_experiment_api_refuses_what_it_does_not_provide(compat_env: Path) -> None:
    script = (
        "from nni.experiment import Experiment\n"
        "try:\n    Experiment('local').view\nexcept AttributeError as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=compat_env,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SHIMS)},
        timeout=60,
    )
    assert "Experiment.view is not provided" in done.stdout, done.stderr


def test_load_ext_makes_the_experiment_api_importable_in_a_notebook(compat_env: Path) -> None:
    """Where NNI is not installed, `%load_ext kubelab` puts the shims last on sys.path."""
    script = (
        "import importlib.util, sys\n"
        "assert importlib.util.find_spec('nni') is None\n"
        "from kubelab.magics import _compat_modules\n"
        "_compat_modules()\n"
        "from nni.experiment import Experiment\n"
        "from polyaxon import tracking\n"
        "print(Experiment('local').get_status(), sys.path[-1].endswith('nni_compat'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=compat_env, capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.split() == ["INITIALIZED", "True"], done.stderr
