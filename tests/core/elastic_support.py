"""What the elastic tests share: a gloo training script that checkpoints and resumes, starting
it as an elastic run, the high-priority run that takes a GPU, and polling its metrics."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubelab.experiments import Experiments

# Replica 1 stalls the group when PAUSE_FILE exists (a lost machine is simulated on it); every
# rank learns of GO_FILE at the same step (an all_reduce), and the run ends there once its
# world is FINISH_WORLD (0: any size). A checkpoint every 5 steps holds the weight, one a step.
TRAIN = textwrap.dedent(
    """
    import os, pathlib, time, torch, torch.distributed as dist, kubelab
    dist.init_process_group("gloo")
    rank, size, me = dist.get_rank(), dist.get_world_size(), os.environ["KUBELAB_REPLICA"]
    found = kubelab.latest_checkpoint()
    start, weight = 0, torch.zeros(1)
    if found:
        start, weight = found[0], torch.load(found[1] / "w.pt")
    print(f"start {start} world {size} replica {me}", flush=True)
    pause, go = pathlib.Path(os.environ["PAUSE_FILE"]), pathlib.Path(os.environ["GO_FILE"])
    finish = int(os.environ["FINISH_WORLD"])
    step = start
    while True:
        step += 1
        if me == "1" and pause.exists():  # stalls the group inside its next all_reduce
            print(f"paused at step {step}", flush=True)
            while True:
                time.sleep(0.05)
        both = torch.tensor([1.0, float(go.exists())])
        dist.all_reduce(both)
        weight += both[0] / size
        if rank == 0:
            kubelab.report(step=step, loss=1.0 / step, world=size, weight=weight.item())
            if step % 5 == 0:
                kubelab.save_checkpoint(step, lambda d: torch.save(weight, d / "w.pt"))
        if both[1] > 0 and finish in (0, size) and step >= start + 3:
            break
        time.sleep(0.05)
    dist.destroy_process_group()
    """
)
# The urgent run: holds its GPU until RELEASE_FILE exists.
HOLD = (
    "import os, pathlib, time\nwhile not pathlib.Path(os.environ['RELEASE_FILE']).exists(): time.sleep(0.05)"
)


def start_elastic(
    lab: Experiments,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    spec: dict[str, Any],
    gpus: int | None = None,
    finish_world: int = 0,
    script: str = TRAIN,
) -> str:
    """An elastic PyTorch run of `script` (`spec` overrides), on `gpus` fake GPUs if given; its id.
    The files the script and HOLD watch are `pause`, `go` and `release` in `folder`."""
    pytest.importorskip("torch")
    if gpus is not None:
        monkeypatch.setenv("KUBELAB_FAKE_GPUS", str(gpus))
    for name in ("pause", "go", "release"):
        monkeypatch.setenv(f"{name.upper()}_FILE", str(folder / name))
    monkeypatch.setenv("FINISH_WORLD", str(finish_world))
    (folder / "train.py").write_text(script)
    base = {"name": "elastic", "command": ["python", str(folder / "train.py")], "framework": "pytorch"}
    run_id: str = lab.submit({**base, **spec})["id"]
    return run_id


def take_a_gpu(lab: Experiments) -> str:
    """A high-priority run on one GPU, held until `release`; its id."""
    spec = {"name": "urgent", "command": ["python", "-c", HOLD], "resources": {"gpus": 1}, "priority": "high"}
    run_id: str = lab.submit(spec)["id"]
    return run_id


def steps(lab: Experiments, run_id: str) -> list[dict[str, Any]]:
    """The run's reported steps (not its final values)."""
    return [point for point in lab.metrics(run_id) if "step" in point]


def worlds(lab: Experiments, run_id: str) -> list[int]:
    """The group's size at each reported step."""
    return [point["metrics"]["world"] for point in steps(lab, run_id)]


def poll(predicate: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
