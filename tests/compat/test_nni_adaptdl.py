"""NNI's AdaptDL training service (`adl`): its configs run as preemptible trials that resume
from their checkpoints, with the trial image, CPU and memory they name; what kubelab cannot do
(resize a trial, another namespace, NFS, pull secrets) is refused by NNI's own field names."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sweeps.sweep_support import wait_sweep

from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.formats.nni_config import load_nni_config, nni_to_sweep
from kubelab.sweeps.service import Sweeps
from kubelab.sweeps.sweep_spec import SweepSpec

FIXTURES = Path(__file__).parent / "fixtures"
SPACE = {"lr": {"_type": "choice", "_value": [0.1]}}


def test_a_v1_adaptdl_config_becomes_preemptible_trials_with_its_resources() -> None:
    converted = load_nni_config(FIXTURES / "nni_adaptdl" / "config.yml")
    trial = converted["trial"]
    assert (trial["priority"], trial["preemptible"], trial["image"]) == ("low", True, "python:3.11")
    assert trial["resources"] == {"cpu": "1", "memory": "1Gi"}
    SweepSpec.parse(converted)


def test_a_v2_adaptdl_service_is_read_the_same_way() -> None:
    config = {
        "searchSpace": SPACE,
        "trialCommand": "python main.py",
        "trialGpuNumber": 1,
        "maxTrialNumber": 1,
        "tuner": {"name": "Random"},
        "trainingService": {"platform": "adl", "adaptive": False, "memorySize": "2GB"},
    }
    trial = nni_to_sweep(config)["trial"]
    assert trial["resources"] == {"gpus": 1, "memory": "2G"} and trial["priority"] == "low"


@pytest.mark.parametrize(
    ("setting", "path", "reason"),
    [
        ({"adaptive": True}, "trial.adaptive", "which kubelab does not run"),
        ({"namespace": "default"}, "trial.namespace", "your own namespace"),
        ({"nfs": {"server": "10.0.0.2", "path": "/data"}}, "trial.nfs", "volume mounts"),
        ({"imagePullSecrets": [{"name": "regcred"}]}, "trial.imagePullSecrets", "your admin's"),
        (
            {"checkpoint": {"storageSize": "1Gi", "mountPath": "/ckpt"}},
            "trial.checkpoint",
            "storageClass and",
        ),
        ({"cpuNumber": 2}, "trial.cpuNumber", "did you mean 'cpuNum'"),
    ],
)
def test_what_adaptdl_asks_and_kubelab_cannot_give_is_refused_by_name(
    setting: dict[str, Any], path: str, reason: str
) -> None:
    config = {
        "trialConcurrency": 1,
        "trainingServicePlatform": "adl",
        "searchSpacePath": "s.json",
        "tuner": {"builtinTunerName": "Random"},
        "trial": {"command": "python main.py", "codeDir": ".", "gpuNum": 0, **setting},
    }
    with pytest.raises(ValidationError) as refused:
        nni_to_sweep(config)
    found = {f.path: f.reason for f in refused.value.fields}
    assert reason in found.get(path, ""), found


def test_adaptdl_trials_run_here_as_low_priority_runs_that_checkpoint(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweeps: Sweeps, compat_env: Path
) -> None:
    sweep_id = cli("sweep", "-f", "nni_adaptdl/config.yml").stdout.strip()
    wait_sweep(sweeps, sweep_id, timeout=120)
    final = sweeps.get(sweep_id)
    assert final["status"] == "Succeeded", final
    lab = Experiments()
    for trial in final["trials"]:
        record = lab.get(trial["id"])
        assert record["spec"]["priority"] == 100 and record["spec"]["preemptible"] is True
        assert "checkpoints in" in "".join(lab.logs(trial["id"]))
    for trial in final["trials"]:  # the last step's loss: lr / 3, each step run once
        assert trial["objective"] in (pytest.approx(0.1 / 3), pytest.approx(0.01 / 3)), trial
