"""Reported metrics reach TensorBoard: the runner mirrors metrics.jsonl into event files."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kubelab_testing import wait_until
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from kubelab.experiments import Experiments
from kubelab.tensorboard.tfevents import SUBDIR, ScalarMirror, scalars


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float, float]]]:
    """What TensorBoard itself reads from the event files: tag -> (step, value, wall time),
    for the tags its scalars dashboard shows."""
    accumulator = EventAccumulator(str(folder))
    accumulator.Reload()
    return {
        tag: [
            (e.step, round(float(make_ndarray(e.tensor_proto)), 6), e.wall_time)
            for e in accumulator.Tensors(tag)
        ]
        for tag in accumulator.Tags()["tensors"]
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name == "scalars"
    }


def test_a_runs_reported_metrics_appear_as_tensorboard_scalars(lab: Experiments, lab_env: Path) -> None:
    train = lab_env / "train.py"
    train.write_text(
        textwrap.dedent("""
        import os, kubelab
        for step in range(3):
            kubelab.report(step=step, loss=1.0 / (step + 1), acc=step / 4)
        kubelab.report_final({"default": 0.75})
        # the user's own event files live in the same folder
        open(os.path.join(os.environ["KUBELAB_TENSORBOARD_DIR"], "events.out.tfevents.mine"), "w").close()
    """)
    )
    record = lab.submit({"name": "tb", "command": ["python", str(train)]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    board = lab.runs_root / record["id"] / "tensorboard"
    assert (board / "events.out.tfevents.mine").exists()
    # The runner writes the status first and mirrors the last lines right after, so that a
    # run's end is never held up by event-file writes.
    deadline = time.monotonic() + 30
    while not (board / SUBDIR).exists() or "final/default" not in read_scalars(board / SUBDIR):
        assert time.monotonic() < deadline, "no event file with the final value"
        time.sleep(0.1)
    found = read_scalars(board / SUBDIR)
    reported = [
        json.loads(line) for line in (lab.runs_root / record["id"] / "metrics.jsonl").read_text().splitlines()
    ]
    assert [(s, v) for s, v, _ in found["loss"]] == [(0, 1.0), (1, 0.5), (2, 0.333333)]
    assert [(s, v) for s, v, _ in found["acc"]] == [(0, 0.0), (1, 0.25), (2, 0.5)]
    assert [w for _, _, w in found["loss"]] == [e["time"] for e in reported[:3]]  # wall-time axis
    assert [(s, v) for s, v, _ in found["final/default"]] == [(2, 0.75)]


def test_the_mirror_waits_for_torn_lines_and_appends_only_new_ones(tmp_path: Path) -> None:
    board = tmp_path / "tensorboard"
    mirror = ScalarMirror(tmp_path, board)
    assert mirror.sync() == 0  # nothing reported yet: no file, no event file
    assert not (board / SUBDIR).exists()
    with open(tmp_path / "metrics.jsonl", "w") as out:
        out.write('{"step": 1, "metrics": {"loss": 2.0}, "time": 10.0}\n{"step": 2, "metr')
    assert mirror.sync() == 1
    with open(tmp_path / "metrics.jsonl", "a") as out:
        out.write('ics": {"loss": 1.0, "bad": NaN}, "time": 11.0}\nnot json\n')
    assert mirror.sync() == 1  # NaN is skipped, a broken line is ignored
    assert mirror.sync() == 0
    mirror.close()
    assert read_scalars(board / SUBDIR) == {"loss": [(1, 2.0, 10.0), (2, 1.0, 11.0)]}


def test_scalars_name_replicas_and_final_values() -> None:
    assert scalars({"step": 3, "metrics": {"loss": 1}, "replica": 2, "time": 5}, 0) == [
        ("loss/replica-2", 1.0, 3, 5.0)
    ]
    assert scalars({"final": True, "metrics": {"default": 0.5, "flag": True}}, 7) == [
        ("final/default", 0.5, 7, None)
    ]
    assert scalars({"metrics": "oops"}, 0) == []


def test_the_trial_side_never_imports_tensorboard(tmp_path: Path) -> None:
    code = "import sys, kubelab; kubelab.report(loss=1.0); print('tensorboard' in sys.modules)"
    env = {"PATH": "/usr/bin:/bin", "KUBELAB_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_system_samples_are_mirrored_apart_from_the_users_tags(tmp_path: Path) -> None:
    board = tmp_path / "tensorboard"
    mirror = ScalarMirror(tmp_path, board)
    with open(tmp_path / "system.jsonl", "w") as out:
        out.write('{"sources": {"gpu": "nvml", "process": "psutil"}, "missing": {}}\n')
        out.write(
            '{"time": 100.0, "gpus": [{"index": 0, "util": 87.0, "power_w": 250.5}], "cpu_percent": 99.0}\n'
        )
        out.write('{"time": 105.0, "gpus": [{"index": 0, "util": 91.0}], "rss_mib": 812.0}\n{"time": 1')
    assert mirror.sync_system() == 5
    assert mirror.sync_system() == 0  # the torn line waits
    mirror.close()
    assert read_scalars(board / SUBDIR) == {
        "system/gpu0/util": [(0, 87.0, 100.0), (1, 91.0, 105.0)],
        "system/gpu0/power_w": [(0, 250.5, 100.0)],
        "system/cpu_percent": [(0, 99.0, 100.0)],
        "system/rss_mib": [(1, 812.0, 105.0)],
    }
