"""Trials on Kubernetes find the NNI and Polyaxon shims too: submit stages a copy of them in the
run directory (mounted in the pod at the same path) and the pod's PYTHONPATH points there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from kubelab.shims import SHIMS_DIR, stage


def test_staged_shims_import_without_kubelab(tmp_path: Path) -> None:
    staged = stage(tmp_path / "run")
    assert staged == tmp_path / "run" / SHIMS_DIR
    script = (
        "import json, nni, nni.experiment, polyaxon.tracking, polyaxon_client.tracking\n"
        "print(json.dumps([nni.__file__, polyaxon.tracking.__file__, nni.get_next_parameter()]))\n"
    )
    # -S and -I: no site-packages, no kubelab install, as in a bare training image
    done = subprocess.run(
        [sys.executable, "-S", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PYTHONPATH": str(staged),
            "KUBELAB_NNI_PARAMS": '{"lr": 0.1}',
            "PATH": os.environ.get("PATH", ""),
        },
    )
    files = json.loads(done.stdout)
    assert files[0].startswith(str(staged)) and files[1].startswith(str(staged)), done.stderr
    assert files[2] == {"lr": 0.1}
    stage(tmp_path / "run")  # a retried submit stages again without failing


def test_rendered_pods_have_the_shims_on_pythonpath(
    cli: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    done = cli(
        "render",
        "--backend",
        "kubernetes",
        "-o",
        "json",
        "--",
        "python",
        "train.py",
        env={"KUBELAB_NAMESPACE": "alice", "KUBELAB_IMAGE": "python:3.11"},
    )
    objects = json.loads(done.stdout)
    job = next(o for o in objects if o["kind"] == "Job")
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    run_dir = env["KUBELAB_RUN_DIR"]
    assert env["PYTHONPATH"].split(":") == [f"{run_dir}/{SHIMS_DIR}"]
