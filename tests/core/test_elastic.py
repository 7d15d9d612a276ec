"""Elastic PyTorch runs on the local backend: replicas {min, max} as torchrun agents meeting at a
c10d rendezvous; a lost replica leaves the others training, from their latest checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from elastic_support import poll, start_elastic, steps, worlds
from kubelab_testing import wait_until

from kubelab.elastic import Elastic
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.options import replica_count
from kubelab.run_timeline import timeline
from kubelab.spec import ExperimentSpec


def kill_tree(pid: int) -> None:
    """A lost machine: the replica's torchrun agent and its worker (in a session of its own) at once."""
    agent = psutil.Process(pid)
    for process in [agent, *agent.children(recursive=True)]:
        process.send_signal(signal.SIGKILL)


def test_a_lost_replica_leaves_the_other_training_from_its_checkpoint(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = start_elastic(lab, lab_env, monkeypatch, {"replicas": "1:2"}, finish_world=1)
    run_dir = lab.runs_root / run_id
    poll(
        lambda: list((run_dir / "checkpoints").glob("step-*")) and len(steps(lab, run_id)) >= 7,
        "a checkpoint at 2 replicas",
    )
    (lab_env / "pause").touch()
    poll(lambda: "paused at step" in "".join(lab.logs(run_id, replica=1)), "replica 1 to stall the group")
    kill_tree(json.loads((run_dir / "status.json").read_text())["replicas"][1]["pid"])
    going_on = wait_until(
        lab, run_id, states={"Running"}, reason="1 of 2 replicas go on from step", timeout=60
    )
    assert going_on["reason"].startswith("replica 1 "), going_on
    poll(lambda: 1 in worlds(lab, run_id), "a step at 1 replica")
    (lab_env / "go").touch()
    final = wait_until(lab, run_id, timeout=90)
    assert final["status"] == "Succeeded", "".join(lab.logs(run_id))
    assert final["reason"] == "1 of 2 processes exited 0; lost replica 1"
    log = "".join(lab.logs(run_id, replica=0))
    assert "start 0 world 2 replica 0" in log
    resumed = int(log.split(" world 1 replica 0")[0].rsplit("start ", 1)[1])
    assert resumed >= 5 and resumed % 5 == 0  # from its checkpoint, not from step 0
    points = steps(lab, run_id)
    numbers = [p["step"] for p in points]
    assert numbers == list(range(1, numbers[-1] + 1)), "each step once, continuous"
    sizes = [p["metrics"]["world"] for p in points]
    assert sizes[0] == 2 and sizes[-1] == 1 and sizes == sorted(sizes, reverse=True)
    # The weight went on from the checkpoint: one per step, whatever the group's size.
    assert [p["metrics"]["weight"] for p in points] == [float(n) for n in numbers]
    assert final["restarts"] == 1
    spans = timeline(final["history"])  # kubelab show: the loss is a span of its own
    assert [span.state for span in spans][-3:] == ["Running", "Running", "Succeeded"]
    assert "1 of 2 replicas go on from step" in spans[-2].reason


SIZE = textwrap.dedent(
    """
    import os, torch.distributed as dist
    dist.init_process_group("gloo")
    env = os.environ
    print(f"world {dist.get_world_size()} of {env['KUBELAB_REPLICAS']} on GPU {env['CUDA_VISIBLE_DEVICES']}", flush=True)
    dist.destroy_process_group()
    """
)
HOLD = "import os, pathlib, time\nwhile not pathlib.Path(os.environ['GO_FILE']).exists(): time.sleep(0.05)"


def test_an_elastic_run_starts_with_the_replicas_the_free_gpus_allow(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "2")
    monkeypatch.setenv("GO_FILE", str(lab_env / "go"))
    holder = lab.submit({"command": ["python", "-c", HOLD], "resources": {"gpus": 1}, "priority": "low"})
    assert wait_until(lab, holder["id"], states={"Running"})["gpu_ids"] == [0]
    (lab_env / "size.py").write_text(SIZE)
    spec = {
        "command": ["python", "size.py"],
        "replicas": "1:2",
        "framework": "pytorch",
        "resources": {"gpus": 1},
    }
    record = lab.submit(spec)
    final = wait_until(lab, record["id"], timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(record["id"]))
    assert "world 1 of 1 on GPU 1" in "".join(lab.logs(record["id"], replica=0))
    held = lab.get(holder["id"])  # the free GPU was enough: the low run was not preempted for a second
    assert held["status"] == "Running" and held["restarts"] == 0, held
    (lab_env / "go").touch()
    assert wait_until(lab, holder["id"])["status"] == "Succeeded"


@pytest.mark.parametrize(
    ("spec", "path", "reason"),
    [
        ({"replicas": {"min": 3, "max": 2}}, "replicas.min", "at most replicas.max (2), not 3"),
        ({"replicas": "0:2"}, "replicas.min", "from 1 to 1024, not '0'"),
        ({"elastic": {"min": 2, "max": 1}}, "elastic.min", "at most elastic.max (1)"),
        ({"elastic": {"min": 1}}, "elastic.max", "is required"),
        ({"elastic": {"min": 1, "max": 2, "size": 3}}, "elastic.size", "unknown field"),
        ({"elastic": {"min": 1, "max": 2}, "replicas": 3}, "replicas", "starts with elastic.max (2)"),
        ({"replicas": "1:2", "framework": "tensorflow"}, "framework", "framework pytorch, not 'tensorflow'"),
        ({"replicas": "1:2", "framework": "none"}, "framework", "framework pytorch, not 'none'"),
    ],
)
def test_bad_elastic_specs_are_refused_by_field(
    lab: Experiments, spec: dict[str, Any], path: str, reason: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        lab.submit({"command": "true", "framework": "pytorch", **spec})
    assert any(f.path == path and reason in f.reason for f in caught.value.fields), caught.value.fields
    assert lab.list()[0] == []


def test_the_three_spellings_of_a_range_are_one_spec() -> None:
    spellings: list[dict[str, Any]] = [
        {"replicas": "1:4"},
        {"replicas": {"min": 1, "max": 4}},
        {"elastic": {"min": 1, "max": 4}},
    ]
    specs = [ExperimentSpec.parse({"command": "t", "framework": "pytorch", **s}) for s in spellings]
    assert all(s.elastic == Elastic(1, 4, 3) and s.replicas == 4 for s in specs)
    assert ExperimentSpec.parse(specs[0].to_dict()) == specs[0]
    assert ExperimentSpec.parse({"command": "t", "replicas": 2, "framework": "pytorch"}).elastic is None
    assert replica_count("1:4") == "1:4" and replica_count("3") == 3
    with pytest.raises(Exception, match="MIN:MAX"):
        replica_count("1:x")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--replicas", "1:x"), "replicas: must be a whole number or MIN:MAX such as 1:4, not '1:x'"),
        (
            ("--replicas", "3:2", "--framework", "pytorch"),
            "replicas.min: must be at most replicas.max (2), not 3",
        ),
        (("--replicas", "1:2", "--framework", "paddle"), "framework: an elastic run (replicas min:max)"),
    ],
)
def test_kubelab_run_refuses_a_bad_range_by_field(
    cli: Callable[..., subprocess.CompletedProcess[str]], args: tuple[str, ...], message: str
) -> None:
    assert message in cli("run", *args, "--", "true", check_rc=2).stderr
    assert json.loads(cli("ls", "-o", "json").stdout)["total"] == 0
