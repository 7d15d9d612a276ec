"""The trial side: standard library only, and the same code in and out of a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

import kubelab


def test_import_pulls_in_nothing_heavy() -> None:
    code = (
        "import sys, kubelab; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('yaml', 'kubernetes', 'optuna', 'jupyter_server', 'tornado', 'requests', 'numpy')))"
    )
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "[]"


def test_inside_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("KUBELAB_PARAMS", json.dumps({"lr": 0.1}))
    monkeypatch.setenv("RANK", "1")
    assert kubelab.params({"lr": 1, "wd": 0}) == {"lr": 0.1, "wd": 0}
    kubelab.report(step=4, loss=0.5)
    kubelab.report(loss=0.4)  # the step counts on
    kubelab.report_final({"default": 0.9, "acc": 0.9})
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(entry.get("step"), entry["metrics"]) for entry in lines] == [
        (4, {"loss": 0.5}),
        (5, {"loss": 0.4}),
        (None, {"default": 0.9, "acc": 0.9}),
    ]
    assert all(entry["replica"] == 1 for entry in lines) and lines[-1]["final"] is True


def test_outside_a_run_it_uses_a_scratch_run_and_says_so_once(tmp_path: Path) -> None:
    code = "import kubelab; kubelab.report(loss=1.0); kubelab.report(loss=0.5); print(kubelab.run_dir())"
    env = {"PATH": "/usr/bin:/bin", "KUBELAB_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stderr.count("not inside a run") == 1
    scratch = done.stdout.strip()
    assert scratch.startswith(str(tmp_path / "scratch"))
    assert len(Path(scratch, "metrics.jsonl").read_text().splitlines()) == 2


def test_metrics_must_be_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBELAB_RUN_DIR", str(tmp_path))
    with pytest.raises(TypeError, match="metric 'loss' must be a number"):
        kubelab.report(loss=cast(Any, "low"))
