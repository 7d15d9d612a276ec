"""Goodput: useful training steps per second of wall time for a run that is preempted.

One low-priority run of `--steps` steps is preempted `--preemptions` times, each time after it has
run `--after` seconds since it (re)started, by a high-priority run that needs its one GPU
(`KUBELAB_FAKE_GPUS=1`, the local backend). It runs twice in one benchmark, with the same script
and the same preemptions, after a
warm-up run that neither pays for:

- `checkpointed`: saves a checkpoint every `--every` steps and when preempted
  (`kubelab.preempted()`), and resumes from `kubelab.latest_checkpoint()`;
- `scratch` (the baseline): the same loop without checkpoints, so each start begins at step 0.

Each prints a JSON line: wall time from submit to Succeeded, steps executed (every step a process
ran, counted from the raw metrics lines), steps redone after preemptions, and goodput (useful steps
/ wall time). The `goodput` line holds the ratios: goodput checkpointed / scratch, wall time scratch /
checkpointed, and redone steps per preemption against the target (at most one checkpoint interval).

Run: `python benchmarks/bench_goodput.py [--steps 200] [--step-seconds 0.05] [--every 10]
[--preemptions 3] [--after 2]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

TRAIN = textwrap.dedent(
    """
    import sys, time, kubelab
    steps, pause, every, resume = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    found = kubelab.latest_checkpoint() if resume else None
    step = found[0] if found else 0
    while step < steps:
        step += 1
        time.sleep(pause)  # the step's work
        kubelab.report(step=step, loss=1.0 / step)
        if resume and (step % every == 0 or kubelab.preempted()):
            kubelab.save_checkpoint(step, lambda d: (d / "state").write_text(str(step)))
        if kubelab.preempted():
            sys.exit(0)  # within the grace period
    """
)


def wait(predicate: Any, what: str, timeout: float = 300.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise TimeoutError(what)


def one_policy(lab: Any, script: Path, args: argparse.Namespace, checkpointed: bool) -> dict[str, Any]:
    command = ["python", str(script), str(args.steps), str(args.step_seconds), str(args.every)]
    started = time.monotonic()
    run = lab.submit(
        {
            "name": "checkpointed" if checkpointed else "scratch",
            "command": [*command, "1" if checkpointed else "0"],
            "resources": {"gpus": 1},
            "priority": "low",
            "preemption_grace": 30,
        }
    )
    for preemption in range(args.preemptions):
        wait(lambda: lab.get(run["id"])["status"] == "Running", "the low run running")
        time.sleep(args.after)  # the low run trains for a while, then a deadline run arrives
        if lab.get(run["id"])["status"] != "Running":
            break  # it ended first: --steps too few for --preemptions × --after
        high = lab.submit(
            {
                "name": f"deadline-{preemption}",
                "command": ["python", "-c", "pass"],
                "resources": {"gpus": 1},
                "priority": "high",
            }
        )
        wait(lambda h=high["id"]: lab.get(h)["status"] == "Succeeded", "the high run's end")
    final = wait(lambda: (r := lab.get(run["id"]))["status"] in ("Succeeded", "Failed") and r, "the end")
    wall = time.monotonic() - started
    if final["status"] != "Succeeded":
        raise RuntimeError(f"{final['name']} {final['status']}: {final['reason']}")
    metrics = Path(lab.runs_root / run["id"] / "metrics.jsonl").read_text().splitlines()
    executed = sum(1 for line in metrics if '"step"' in line and '"resume"' not in line)
    redone = executed - args.steps
    return {
        "bench": "goodput_checkpointed" if checkpointed else "goodput_scratch",
        "wall_s": round(wall, 2),
        "useful_steps": args.steps,
        "executed_steps": executed,
        "redone_steps": redone,
        "preemptions": final["restarts"],
        "goodput_steps_per_s": round(args.steps / wall, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    parser.add_argument("--every", type=int, default=10, help="checkpoint interval in steps")
    parser.add_argument("--preemptions", type=int, default=3)
    parser.add_argument("--after", type=float, default=2.0, help="seconds run before each preemption")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubelab-goodput-") as tmp:
        os.environ.update(
            KUBELAB_HOME=str(Path(tmp) / "home"),
            KUBELAB_MACHINE_DIR=str(Path(tmp) / "machine"),
            KUBELAB_FAKE_GPUS="1",
        )
        from kubelab.experiments import Experiments

        lab = Experiments()
        script = Path(tmp) / "train.py"
        script.write_text(TRAIN)
        warm = lab.submit({"command": ["python", str(script), "1", "0", "1", "0"], "resources": {"gpus": 1}})
        wait(lambda: lab.get(warm["id"])["status"] == "Succeeded", "the warm-up run")  # neither pays it
        lines = [one_policy(lab, script, args, checkpointed) for checkpointed in (True, False)]
    for line in lines:
        print(json.dumps(line), flush=True)
    ckpt, scratch = lines
    per_preemption = ckpt["redone_steps"] / max(1, ckpt["preemptions"])
    summary = {
        "bench": "goodput",
        "ratio_goodput": round(ckpt["goodput_steps_per_s"] / scratch["goodput_steps_per_s"], 2),
        "ratio_wall_scratch_over_checkpointed": round(scratch["wall_s"] / ckpt["wall_s"], 2),
        "redone_per_preemption_checkpointed": round(per_preemption, 2),
        "redone_per_preemption_scratch": round(scratch["redone_steps"] / max(1, scratch["preemptions"]), 2),
        "target_redone_per_preemption": args.every,
    }
    print(json.dumps(summary), flush=True)
    if per_preemption > args.every:
        print("checkpointed run redid more than one checkpoint interval per preemption", file=sys.stderr)


if __name__ == "__main__":
    main()
