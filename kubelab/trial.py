"""The trial side: read parameters, report metrics. Standard library only.

This is what runs inside a training script, in any image, so it imports nothing
beyond the standard library and costs almost nothing to import. Inside a kubelab
run it writes to the run's `metrics.jsonl`; outside one (a notebook, a terminal) it
writes to a scratch run and says so once, so the same script runs anywhere.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from kubelab.nni_compat._kubelab_numbers import number

_state: dict[str, Any] = {"step": 0, "warned": False}


def in_run() -> bool:
    """True inside a process started by a kubelab backend."""
    return bool(os.environ.get("KUBELAB_RUN_DIR"))


def run_id() -> str:
    return os.environ.get("KUBELAB_RUN_ID", "scratch")


def run_dir() -> Path:
    """The run directory, or a scratch directory when not inside a run."""
    path = os.environ.get("KUBELAB_RUN_DIR")
    if path:
        return Path(path)
    import tempfile  # only outside runs: keeps `import kubelab` cheap for trials

    home = os.environ.get("KUBELAB_HOME") or os.path.join(tempfile.gettempdir(), "kubelab-scratch")
    scratch = Path(home) / "scratch" / str(os.getpid())
    if not _state["warned"]:
        _state["warned"] = True
        print(f"kubelab: not inside a run; metrics go to {scratch}", file=sys.stderr)
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch


def tensorboard_dir() -> Path:
    """Where to write TensorBoard event files so kubelab's TensorBoard sessions find them."""
    path = os.environ.get("KUBELAB_TENSORBOARD_DIR")
    target = Path(path) if path else run_dir() / "tensorboard"
    target.mkdir(parents=True, exist_ok=True)
    return target


def params(defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """This run's parameters (`KUBELAB_PARAMS`) over `defaults`."""
    values = dict(defaults or {})
    raw = os.environ.get("KUBELAB_PARAMS")
    if raw:
        values.update(json.loads(raw))
    return values


def report(step: int | None = None, **metrics: float) -> None:
    """Record metrics at a step (the step counts up by itself when omitted)."""
    if step is None:
        step = _state["step"]
    _state["step"] = step + 1
    _append({"step": step, "metrics": _numbers(metrics)})


def report_final(value: float | dict[str, float]) -> None:
    """Record the final result; a dict's `default` key (NNI style) is the objective."""
    metrics = dict(value) if isinstance(value, dict) else {"default": value}
    _append({"final": True, "metrics": _numbers(metrics)})


def _numbers(metrics: dict[str, Any]) -> dict[str, Any]:
    result = {}
    for name, value in metrics.items():
        found = number(value)
        if found is None:
            raise TypeError(f"kubelab.report: metric '{name}' must be a number, not {value!r}")
        result[name] = found
    return result


def _append(entry: dict[str, Any]) -> None:
    entry["time"] = round(time.time(), 3)
    rank = os.environ.get("RANK")
    if rank not in (None, "0"):
        entry["replica"] = int(rank)
    line = json.dumps(entry, allow_nan=True) + "\n"
    fd = os.open(run_dir() / "metrics.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())  # one write: lines from several replicas never interleave
    finally:
        os.close(fd)
