"""Trial code written for Polyaxon's tracking client runs unchanged, recording into the run."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from system_users import as_user, needs_root, system_user

V1_SCRIPT = textwrap.dedent("""
    import os
    import polyaxon
    from polyaxon import tracking

    tracking.init(project="mnist", is_offline=False)
    tracking.log_inputs(lr=0.01, optimizer="adam")
    for step in range(3):
        tracking.log_metrics(step=step, loss=1.0 / (step + 1), accuracy=step / 3)
    tracking.log_outputs(best_loss=0.25, note="converged")
    tracking.log_tags(["baseline", "v1"])
    tracking.log_data_ref(name="mnist", path="/data/mnist", hash="a1b2c3")
    tracking.set_description("a tracked run")
    with open("model.txt", "w") as handle:
        handle.write("weights")
    tracking.log_artifact("model.txt")
    print("outputs at", tracking.get_outputs_path())
    print("shim", polyaxon.__file__)
    try:
        tracking.log_image("x.png")
    except AttributeError as error:
        print(error)
""")

V0_SCRIPT = textwrap.dedent("""
    from polyaxon_client.tracking import Experiment, get_outputs_path, get_declarations

    experiment = Experiment()
    experiment.log_params(batch_size=64)
    experiment.log_metrics(step=0, loss=0.5)
    experiment.log_metrics(loss=0.2)
    experiment.log_tags("v0")
    print("declarations", get_declarations())
""")


def test_v1_tracking_records_metrics_params_outputs_tags_and_artifacts(
    cli: Callable[..., subprocess.CompletedProcess[str]], compat_env: Path
) -> None:
    (compat_env / "track.py").write_text(V1_SCRIPT)
    done = cli(
        "run", "--name", "tracked", "--tag", "given", "-o", "json", "--wait", "--", "python", "track.py"
    )
    record = json.loads(done.stdout)
    assert record["status"] == "Succeeded", record
    shown = json.loads(cli("show", record["id"], "-o", "json").stdout)
    assert shown["metrics"]["loss"] == 1 / 3 and shown["metrics"]["best_loss"] == 0.25
    assert shown["step"] == 2
    assert shown["params"] == {"lr": 0.01, "optimizer": "adam"}
    assert shown["tags"] == ["given", "baseline", "v1", "data:mnist"]
    logs = cli("logs", record["id"]).stdout
    assert "/nni_compat/polyaxon/__init__.py" in logs  # the shim, not a real Polyaxon install
    assert "tracking.log_image is not provided" in logs or "log_image is not provided" in logs
    run_dir = compat_env.parent / "home" / "runs" / record["id"]
    assert (run_dir / "outputs" / "model.txt").read_text() == "weights"
    tracked = json.loads((run_dir / "tracking.json").read_text())
    assert tracked["outputs"] == {"note": "converged", "description": "a tracked run"}
    assert tracked["data_refs"] == {"mnist": "a1b2c3"}  # log_data_ref is recorded, never raises
    # the logged values are queryable, also by Polyaxon's names
    found = cli("ls", "in.optimizer:adam, tags:baseline, outputs.best_loss:<0.3", "-o", "json").stdout
    assert [r["id"] for r in json.loads(found)["items"]] == [record["id"]]


def test_v0_experiment_client_records_into_the_run(
    cli: Callable[..., subprocess.CompletedProcess[str]], compat_env: Path
) -> None:
    (compat_env / "track0.py").write_text(V0_SCRIPT)
    done = cli("run", "-P", "lr=0.1", "-o", "json", "--wait", "--", "python", "track0.py")
    record = json.loads(done.stdout)
    shown = json.loads(cli("show", record["id"], "-o", "json").stdout)
    assert shown["metrics"]["loss"] == 0.2
    assert shown["params"] == {"lr": 0.1, "batch_size": 64}  # what the spec set wins over logged names
    assert shown["tags"] == ["v0"]
    assert "declarations {'lr': 0.1}" in cli("logs", record["id"]).stdout


OUTSIDE_A_RUN = textwrap.dedent("""
    from polyaxon import tracking
    with open("model.txt", "w") as handle:
        handle.write("private weights")
    tracking.init(project="mine")
    print(tracking.log_artifact("model.txt") or tracking.get_outputs_path())
""")


@needs_root
def test_outside_a_run_outputs_go_to_a_folder_no_other_account_can_read(tmp_path: Path) -> None:
    shims = Path(__file__).resolve().parents[2] / "kubelab" / "nni_compat"
    shared = Path(tempfile.gettempdir()) / "polyaxon-outputs"
    with system_user("klpa") as user, system_user("klpb") as other:
        made_by_other = not shared.exists()
        if made_by_other:  # another account got there first, open to all
            assert as_user(other, ["mkdir", "-m", "777", str(shared)]).returncode == 0
        try:
            script = Path(user.pw_dir) / "track.py"
            script.write_text(OUTSIDE_A_RUN)
            done = as_user(
                user,
                ["/usr/bin/python3", str(script)],
                cwd=user.pw_dir,
                env={"HOME": user.pw_dir, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(shims)},
            )
            assert done.returncode == 0, done.stderr
            read = as_user(other, ["sh", "-c", f"cat {shared}/model.txt {done.stdout.strip()}/model.txt"])
            assert "private weights" not in read.stdout, (done.stdout, read.stdout)
            folder = Path(user.pw_dir) / "polyaxon-outputs"
            info = folder.stat()
            assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (user.pw_uid, 0o700)
            assert (folder / "model.txt").read_text() == "private weights"
        finally:
            if made_by_other:
                shutil.rmtree(shared, ignore_errors=True)
