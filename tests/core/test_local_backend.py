"""The local backend, end to end with real runner and trial processes."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kubelab_testing import wait_until

from kubelab.errors import NotFound, ValidationError
from kubelab.experiments import Experiments
from kubelab.pids import pid_alive

PY = sys.executable


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_experiment_runs_to_success_with_metrics_and_logs(lab: Experiments, lab_env: Path) -> None:
    train = script(
        lab_env,
        "train.py",
        """
        import os, kubelab
        p = kubelab.params()
        print("lr is", p["lr"], "run", os.environ["KUBELAB_RUN_ID"])
        for step in range(3):
            kubelab.report(step=step, loss=1.0 / (step + 1))
        kubelab.report_final(0.25)
        open(os.path.join(os.environ["KUBELAB_TENSORBOARD_DIR"], "marker"), "w").close()
    """,
    )
    record = lab.submit({"name": "train", "command": ["python", train], "params": {"lr": 0.1}})
    assert record["status"] == "Pending" and record["name"] == "train"
    final = wait_until(lab, record["id"])
    assert final["status"] == "Succeeded", final
    assert final["exit_code"] == 0 and final["reason"] == "exited 0"
    assert final["metrics"] == {"loss": 1 / 3, "default": 0.25} and final["step"] == 2
    assert [h["state"] for h in final["history"]] == ["Running", "Succeeded"]
    log = "".join(lab.logs(record["id"]))
    assert f"lr is 0.1 run {record['id']}" in log
    run_dir = lab.runs_root / record["id"]
    assert (run_dir / "tensorboard" / "marker").exists()
    for name in ("spec.json", "status.json", "logs", "metrics.jsonl", "tensorboard", "outputs"):
        assert (run_dir / name).exists(), name
    assert [p["metrics"] for p in lab.metrics(record["id"])][-1] == {"default": 0.25}


def test_failure_reports_exit_code_and_retries(lab: Experiments) -> None:
    record = lab.submit({"command": "echo attempt; exit 3", "retries": 1})
    final = wait_until(lab, record["id"])
    assert final["status"] == "Failed"
    assert final["exit_code"] == 3 and final["reason"] == "replica 0 exited with code 3"
    assert final["attempt"] == 2
    assert "".join(lab.logs(record["id"])).count("attempt") == 3  # two runs + the retry notice


def test_timeout_fails_the_run(lab: Experiments) -> None:
    record = lab.submit({"command": ["sleep", "30"], "timeout": 1})
    final = wait_until(lab, record["id"])
    assert final["status"] == "Failed" and final["reason"].startswith("timed out after 1s")


def test_stop_terms_then_kills_a_stubborn_process(lab: Experiments, lab_env: Path) -> None:
    stubborn = script(
        lab_env,
        "stubborn.py",
        """
        import signal, time
        signal.signal(signal.SIGTERM, lambda *a: print("ignoring TERM", flush=True))
        print("started", flush=True)
        time.sleep(60)
    """,
    )
    record = lab.submit({"command": ["python", stubborn]})
    wait_until(lab, record["id"], states=("Running",))
    _wait_for_log(lab, record["id"], "started")
    pid = lab.get(record["id"])["replica_status"][0]["pid"]
    lab.stop(record["id"])
    final = wait_until(lab, record["id"])
    assert final["status"] == "Stopped" and final["reason"] == "stopped by user"
    assert "ignoring TERM" in "".join(lab.logs(record["id"]))
    assert not pid_alive(pid)


def test_stop_while_queued_and_gpus_are_handed_out_first_come_first_served(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "T4,T4")
    release = lab_env / "release"
    hold = f"echo CUDA=$CUDA_VISIBLE_DEVICES; while [ ! -e {release} ]; do sleep 0.05; done"
    first = lab.submit({"command": hold, "resources": {"gpus": 2}})
    wait_until(lab, first["id"], states=("Running",))
    second = lab.submit({"command": hold, "resources": {"gpus": 1}})
    third = lab.submit({"command": hold, "resources": {"gpus": 1, "gpu_type": "T4"}})
    wait_until(lab, second["id"], states=("Queued",), reason="waiting for 1 GPU(s): 0 experiment(s) ahead")
    wait_until(lab, third["id"], states=("Queued",), reason="1 experiment(s) ahead")
    assert lab.resources()["gpus"]["free"] == 0
    lab.stop(third["id"])
    stopped = wait_until(lab, third["id"])
    assert stopped["status"] == "Stopped" and stopped["reason"] == "stopped by user while queued"
    release.touch()
    assert wait_until(lab, first["id"])["status"] == "Succeeded"
    done = wait_until(lab, second["id"])
    assert done["status"] == "Succeeded" and done["queued_at"] is not None
    assert "CUDA=0,1" in "".join(lab.logs(first["id"]))
    assert "CUDA=0" in "".join(lab.logs(second["id"]))
    assert lab.resources()["gpus"]["free"] == 2


def test_more_gpus_than_the_machine_has_fails_with_reason(
    lab: Experiments, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    record = lab.submit({"command": "true", "resources": {"gpus": 3}})
    final = wait_until(lab, record["id"])
    assert final["status"] == "Failed"
    assert final["reason"] == "cannot be scheduled: asked for 3 GPU(s) but this machine has 1"


def test_cpu_experiments_see_no_gpu(lab: Experiments, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    record = lab.submit({"command": 'echo "[$CUDA_VISIBLE_DEVICES]"'})
    wait_until(lab, record["id"])
    assert "[]" in "".join(lab.logs(record["id"]))


def test_runs_survive_a_restart_and_are_reattached(lab: Experiments, lab_env: Path) -> None:
    release = lab_env / "release"
    record = lab.submit({"command": f"while [ ! -e {release} ]; do sleep 0.05; done"})
    wait_until(lab, record["id"], states=("Running",))
    again = Experiments()  # a new server or CLI process: it knows only the files
    assert again.get(record["id"])["status"] == "Running"
    release.touch()
    assert wait_until(again, record["id"])["status"] == "Succeeded"


def test_a_lost_runner_is_noticed_and_its_orphans_stopped(lab: Experiments) -> None:
    record = lab.submit({"command": ["sleep", "60"]})
    wait_until(lab, record["id"], states=("Running",))
    detail = lab.get(record["id"])
    runner = (lab.runs_root / record["id"] / "status.json").read_text()
    runner_pid = json.loads(runner)["runner_pid"]
    os.kill(runner_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(runner_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    final = lab.get(record["id"])
    assert final["status"] == "Failed" and "runner process ended" in final["reason"]
    assert not pid_alive(detail["replica_status"][0]["pid"])


def test_code_snapshot_from_a_directory_and_from_source(lab: Experiments, lab_env: Path) -> None:
    project = lab_env / "project"
    project.mkdir()
    (project / "helper.py").write_text("VALUE = 41\n")
    (project / ".git").mkdir()
    (project / ".git" / "big").write_text("x")
    record = lab.submit(
        {"command": ["python", "-c", "import helper; print(helper.VALUE + 1)"], "code": "project"}
    )
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    assert "42" in "".join(lab.logs(record["id"]))
    code = lab.runs_root / record["id"] / "code"
    assert (code / "helper.py").exists() and not (code / ".git").exists()
    cell = lab.submit(
        {"code": {"source": "import kubelab\nkubelab.report(acc=0.9)\n", "filename": "cell.py"}}
    )
    final = wait_until(lab, cell["id"])
    assert final["status"] == "Succeeded" and final["metrics"] == {"acc": 0.9} and final["name"] == "cell"


def test_paths_are_checked_and_confined(lab: Experiments, lab_env: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", "workdir": "missing"})
    assert caught.value.fields[0].path == "workdir" and "does not exist" in caught.value.fields[0].reason
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", "workdir": ".."}, base_dir=lab_env, confine=True)
    assert "outside the workspace" in caught.value.fields[0].reason
    assert list(lab.runs_root.iterdir()) == []  # nothing was created


def test_unknown_ids_are_not_found(lab: Experiments) -> None:
    for bad in ("nope", "../../etc", "1m7zs5xq0rqx"):
        with pytest.raises(NotFound):
            lab.get(bad)


def test_delete_removes_the_record(lab: Experiments) -> None:
    record = lab.submit({"command": ["sleep", "30"]})
    wait_until(lab, record["id"], states=("Running",))
    lab.delete(record["id"])
    assert not (lab.runs_root / record["id"]).exists()
    assert lab.list()[1] == 0


def test_pytorch_two_process_gloo_all_reduce(lab: Experiments, lab_env: Path) -> None:
    pytest.importorskip("torch")
    train = script(
        lab_env,
        "allreduce.py",
        """
        import os, torch, torch.distributed as dist, kubelab
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value)
        print(f"rank {rank} of {dist.get_world_size()} sum {value.item()}", flush=True)
        if rank == 0:
            kubelab.report(total=value.item())
        dist.destroy_process_group()
    """,
    )
    record = lab.submit({"command": ["python", train], "replicas": 2, "framework": "pytorch"})
    final = wait_until(lab, record["id"], timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(record["id"]))
    assert "rank 0 of 2 sum 3.0" in "".join(lab.logs(record["id"], replica=0))
    assert "rank 1 of 2 sum 3.0" in "".join(lab.logs(record["id"], replica=1))
    assert final["metrics"] == {"total": 3.0}


@pytest.mark.parametrize("framework", ["tensorflow", "paddle"])
def test_distributed_environment_contract(lab: Experiments, framework: str) -> None:
    record = lab.submit(
        {
            "command": ["python", "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
            "replicas": 2,
            "framework": framework,
        }
    )
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    envs = [json.loads("".join(lab.logs(record["id"], replica=r))) for r in (0, 1)]
    if framework == "tensorflow":
        configs = [json.loads(e["TF_CONFIG"]) for e in envs]
        assert [c["task"] for c in configs] == [
            {"type": "worker", "index": 0},
            {"type": "worker", "index": 1},
        ]
        assert len(configs[0]["cluster"]["worker"]) == 2 and configs[0]["cluster"] == configs[1]["cluster"]
    else:
        assert [e["PADDLE_TRAINER_ID"] for e in envs] == ["0", "1"]
        endpoints = envs[0]["PADDLE_TRAINER_ENDPOINTS"].split(",")
        assert [e["PADDLE_CURRENT_ENDPOINT"] for e in envs] == endpoints
    for env in envs:
        assert env["KUBELAB_RUN_ID"] == record["id"] and "KUBELAB_PARAMS" in env


def test_one_failed_replica_stops_the_others(lab: Experiments) -> None:
    record = lab.submit(
        {
            "command": 'if [ "$RANK" = 1 ]; then exit 7; fi; sleep 30',
            "replicas": 2,
            "framework": "pytorch",
        }
    )
    final = wait_until(lab, record["id"])
    assert final["status"] == "Failed" and final["reason"] == "replica 1 exited with code 7"


def test_logs_follow_until_the_end_and_bad_replica(lab: Experiments) -> None:
    record = lab.submit({"command": "for i in 1 2 3; do echo line $i; sleep 0.2; done"})
    text = "".join(lab.logs(record["id"], follow=True))
    assert text.split() == ["line", "1", "line", "2", "line", "3"]
    with pytest.raises(ValidationError) as caught:
        lab.logs(record["id"], replica=3)
    assert caught.value.fields[0].path == "replica"


def _wait_for_log(lab: Experiments, run_id: str, text: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in "".join(lab.logs(run_id)):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared")


def test_a_failed_python_run_gives_its_exception_as_the_reason(lab: Experiments, lab_env: Path) -> None:
    crash = script(
        lab_env,
        "crash.py",
        """
        import kubelab
        def load(path):
            raise FileNotFoundError(f"no dataset at {path}")
        print("starting")
        load("/data/mnist")
    """,
    )
    record = lab.submit({"command": ["python", crash]})
    final = wait_until(lab, record["id"])
    assert final["status"] == "Failed" and final["exit_code"] == 1
    assert final["reason"] == "replica 0 exited with code 1: FileNotFoundError: no dataset at /data/mnist"
