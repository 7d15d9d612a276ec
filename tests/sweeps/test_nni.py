"""NNI trial code, unchanged, on kubelab: the `nni` module kubelab gives trials, and NNI configs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from sweep_support import wait_sweep

from kubelab.records import RunDirectory
from kubelab.shims import SHIMS
from kubelab.sweeps.service import Sweeps

sys.path.insert(0, str(SHIMS))
try:
    # kubelab's nni: no real NNI is installed here, and the shim comes first anyway
    from nni.utils import OptimizeMode, extract_scalar_reward, merge_parameter
finally:
    sys.path.remove(str(SHIMS))


def run_trial(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` as a trial process would see it: the shim on PYTHONPATH, kubelab's variables set."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("KUBELAB_")}
    full.update(env, PYTHONPATH=str(SHIMS))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_trial_api_writes_kubelab_metrics(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    env = {
        "KUBELAB_RUN_DIR": str(run),
        "KUBELAB_RUN_ID": "1m7zsfq8wjq7",
        "KUBELAB_SWEEP_ID": "1m7zsfp2pjcr",
        "KUBELAB_TRIAL": "4",
        "KUBELAB_PARAMS": json.dumps({"lr": 0.1, "fixed": 1}),
        "KUBELAB_NNI_PARAMS": json.dumps({"lr": 0.1, "layer": {"_name": "conv", "kernel": 3}}),
    }
    done = run_trial(
        """
        import json, sys
        before = set(sys.modules)
        import nni
        from nni.utils import merge_parameter
        # the shims' own shared module, beside nni on the trial's path, is standard library only too
        added = {m.split(".")[0] for m in set(sys.modules) - before} - {"nni", "_kubelab_numbers"}
        assert added <= set(sys.stdlib_module_names), added  # standard library only
        params = nni.get_next_parameter()
        assert params == {"lr": 0.1, "layer": {"_name": "conv", "kernel": 3}}, params
        assert nni.get_current_parameter("lr") == 0.1
        print(nni.get_trial_id(), nni.get_experiment_id(), nni.get_sequence_id(), nni.__file__)
        nni.report_intermediate_result(0.5)
        nni.report_intermediate_result({"default": 0.6, "acc": 0.7, "note": "text is dropped"})
        nni.report_final_result({"default": 0.9, "loss": 0.1})
    """,
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    trial_id, experiment, sequence, module = done.stdout.split()
    assert (trial_id, experiment, sequence) == ("1m7zsfq8wjq7", "1m7zsfp2pjcr", "4")
    assert Path(module).parent == SHIMS / "nni"
    points = list(RunDirectory(run).metrics())
    assert [(p.get("step"), p.get("final"), p["metrics"]) for p in points] == [
        (0, None, {"default": 0.5}),
        (1, None, {"default": 0.6, "acc": 0.7}),
        (None, True, {"default": 0.9, "loss": 0.1}),
    ]
    assert RunDirectory(run).latest_metrics() == ({"default": 0.9, "acc": 0.7, "loss": 0.1}, 1)


def test_standalone_mode_outside_kubelab(tmp_path: Path) -> None:
    done = run_trial(
        """
        import nni
        assert nni.get_next_parameter() == {}
        assert (nni.get_trial_id(), nni.get_experiment_id(), nni.get_sequence_id()) == ("STANDALONE", "STANDALONE", 0)
        nni.report_final_result(0.5)
    """,
        {},
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "final result 0.5" in done.stderr
    assert not list(tmp_path.rglob("metrics.jsonl"))


def test_bad_results_are_explained_not_recorded(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    done = run_trial(
        """
        import nni
        nni.report_final_result("high")
        nni.report_final_result({"accuracy": 0.9})
    """,
        {"KUBELAB_RUN_DIR": str(run)},
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "the result must be a number or a dict with 'default', not 'high'" in done.stderr
    assert "a dict result needs a numeric 'default' key (the objective); got ['accuracy']" in done.stderr
    assert [p["metrics"] for p in RunDirectory(run).metrics()] == [{"accuracy": 0.9}]


def test_merge_parameter_like_nni() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--act", default=None)
    args = merge_parameter(parser.parse_args([]), {"lr": 1, "epochs": 5, "act": "relu"})
    assert (args.lr, args.epochs, args.act) == (1.0, 5, "relu") and isinstance(args.lr, float)
    assert merge_parameter({"a": 1}, None) == {"a": 1}
    assert merge_parameter({"a": 1, "b": "x"}, {"b": "y"}) == {"a": 1, "b": "y"}
    with pytest.raises(ValueError, match="Key 'batch' not found in base parameters."):
        merge_parameter(parser.parse_args([]), {"batch": 32})
    with pytest.raises(
        ValueError, match="Expected 'epochs' in override parameters to have type 'int', but found 'str'."
    ):
        merge_parameter({"epochs": 3}, {"epochs": "many"})
    with pytest.raises(ValueError, match="type 'int', but found 'float'"):
        merge_parameter({"epochs": 3}, {"epochs": 2.5})
    assert extract_scalar_reward({"default": 0.3, "acc": 1}) == 0.3 and extract_scalar_reward(2) == 2
    with pytest.raises(RuntimeError, match="Incorrect final result"):
        extract_scalar_reward({"acc": 1})
    assert OptimizeMode("maximize") is OptimizeMode.Maximize


def test_the_shim_takes_precedence_over_an_installed_nni(sweeps: Sweeps, sweep_env: Path) -> None:
    fake = sweep_env / "site" / "nni"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('the real NNI was imported')\n")
    record = sweeps.lab.submit(
        {
            "command": ["python", "-c", "import nni; nni.report_final_result(1.5); print(nni.__file__)"],
            "env": {"PYTHONPATH": str(sweep_env / "site")},
        }
    )
    from kubelab_testing import wait_until

    done = wait_until(sweeps.lab, record["id"])
    assert done["status"] == "Succeeded", sweeps.lab.run(record["id"]).log_file().read_text()
    assert done["metrics"] == {"default": 1.5}
    assert str(SHIMS) in sweeps.lab.run(record["id"]).log_file().read_text()


TRIAL = """
import argparse, math, time
import nni
from nni.utils import merge_parameter

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--layer", default=None)
args = merge_parameter(parser.parse_args(), nni.get_next_parameter())
assert args.layer["_name"] in ("dense", "conv"), args.layer  # nested choices arrive NNI-shaped
accuracy = 1 - abs(math.log10(args.lr) + 2) / 4
for epoch in range(3):
    nni.report_intermediate_result(accuracy * (epoch + 1) / 3)
nni.report_final_result({"default": accuracy, "sequence": nni.get_sequence_id()})
"""


def test_nni_trial_and_config_run_unchanged_through_the_cli(sweep_env: Path) -> None:
    project = sweep_env / "mnist"
    project.mkdir()
    (project / "trial.py").write_text(TRIAL)
    (project / "search_space.json").write_text(
        json.dumps(
            {
                "lr": {"_type": "loguniform", "_value": [0.0001, 0.1]},
                "layer": {
                    "_type": "choice",
                    "_value": [
                        {"_name": "dense", "units": {"_type": "choice", "_value": [16, 32]}},
                        {"_name": "conv", "kernel": {"_type": "randint", "_value": [1, 4]}},
                    ],
                },
            }
        )
    )
    (project / "config.yml").write_text(
        yaml.safe_dump(
            {
                "experimentName": "nni-mnist",
                "searchSpaceFile": "search_space.json",
                "trialCommand": "python3 trial.py",
                "trialCodeDirectory": ".",
                "trialConcurrency": 2,
                "maxTrialNumber": 4,
                "tuner": {"name": "TPE", "classArgs": {"optimize_mode": "maximize"}},
                "assessor": {
                    "name": "Medianstop",
                    "classArgs": {"optimize_mode": "maximize", "start_step": 1},
                },
                "trainingService": {"platform": "local"},
            }
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "sweep", "-f", "mnist/config.yml", "--wait", "-o", "json"],
        capture_output=True,
        text=True,
        cwd=sweep_env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(done.stdout)
    assert record["status"] == "Succeeded" and record["name"] == "nni-mnist"
    assert record["objective"] == {"metric": "default", "direction": "maximize"}
    assert record["early_stopping"] == "median" and record["tuner"] == "tpe"
    assert record["counts"]["succeeded"] + record["counts"]["pruned"] == 4
    complete = [t for t in record["trials"] if t["result"] == "complete"]
    assert record["best"]["value"] == max(t["objective"] for t in complete)
    for trial in complete:
        assert trial["metrics"]["sequence"] == trial["trial"]
        lr = trial["params"]["lr"]
        assert trial["objective"] == pytest.approx(1 - abs(__import__("math").log10(lr) + 2) / 4)
        assert trial["params"]["layer"] in ("dense", "conv")


def test_nni_config_over_the_service_with_bad_keys(sweeps: Sweeps, sweep_env: Path) -> None:
    from kubelab.errors import ValidationError

    with pytest.raises(ValidationError) as refused:
        sweeps.create(
            {
                "nni": {
                    "trialCommand": "python3 trial.py",
                    "searchSpace": {},
                    "maxTrialNumbr": 3,
                    "tuner": {"name": "TPE"},
                }
            }
        )
    assert "maxTrialNumbr: unknown NNI config key; did you mean 'maxTrialNumber'?" in refused.value.message()
    assert not sweeps.store.root.exists() or not list(sweeps.store.root.iterdir())
    record = sweeps.create(
        {
            "nni": {
                "trialCommand": "python3 -c 'import nni; nni.report_final_result(nni.get_next_parameter()[\"x\"])'",
                "searchSpace": {"x": {"_type": "choice", "_value": [3, 1, 2]}},
                "tuner": {"name": "GridSearch"},
                "trialConcurrency": 3,
            }
        }
    )
    done = wait_sweep(sweeps, record["id"])
    assert done["status"] == "Succeeded" and done["best"]["value"] == 1 and done["counts"]["succeeded"] == 3
