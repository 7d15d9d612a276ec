"""NNI's trial API, provided by kubelab: trial code written for NNI runs unchanged.

The local runner puts `kubelab/nni_compat` first on a trial's PYTHONPATH (the Kubernetes
backend a copy of it in the run directory: `kubelab/shims.py`), so `import nni` inside a
kubelab trial finds this module even where the real NNI is installed. Standard library only
and cheap to import, like `kubelab.trial`, whose `metrics.jsonl` format it writes (so it
also works in images without kubelab).

- `get_next_parameter()`: the trial's parameters, NNI-shaped (`KUBELAB_NNI_PARAMS`, set
  by the sweep driver; a plain run's `KUBELAB_PARAMS`); `{}` outside kubelab, as NNI's
  standalone mode gives. Under NNI's Hyperband or BOHB they hold `TRIAL_BUDGET` too; under
  its PBTTuner `load_checkpoint_dir` (the checkpoint copied from the member's parent: the
  run's `step-<KUBELAB_START_STEP>`) and `save_checkpoint_dir` (this generation's, made).
- `report_intermediate_result(x)` → a metrics line `{"step": n, "metrics": {"default": x}}`.
- `report_final_result(x)` → `{"final": true, "metrics": {"default": x}}`; a dict's
  `default` key is the objective and its other numbers are kept as metrics too.
- `get_trial_id()`, `get_experiment_id()`, `get_sequence_id()`: the run id, the sweep id
  and the trial number (`STANDALONE`, `STANDALONE` and 0 outside a sweep, as in NNI).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from _kubelab_numbers import number

__version__ = "3.0"
__all__ = [
    "get_current_parameter",
    "get_experiment_id",
    "get_next_parameter",
    "get_sequence_id",
    "get_trial_id",
    "report_final_result",
    "report_intermediate_result",
    "trace",
]

_state: dict[str, Any] = {"params": None, "sequence": 0}


def get_next_parameter() -> dict[str, Any]:
    """This trial's hyperparameters (a new dict each call)."""
    raw = os.environ.get("KUBELAB_NNI_PARAMS") or os.environ.get("KUBELAB_PARAMS")
    params = json.loads(raw) if raw else {}
    budget = os.environ.get("KUBELAB_NNI_TRIAL_BUDGET")
    if budget and isinstance(params, dict):
        # NNI's Hyperband and BOHB add the trial's budget (epochs, steps...) to its parameters.
        params["TRIAL_BUDGET"] = float(budget) if "." in budget else int(budget)
    if os.environ.get("KUBELAB_PBT_GENERATION") and isinstance(params, dict):
        params.update(_pbt_folders())
    if not raw:
        _note("not inside a kubelab trial; get_next_parameter() returns {}")
    _state["params"] = params
    fresh: dict[str, Any] = json.loads(json.dumps(params))
    return fresh


def _pbt_folders() -> dict[str, str]:
    """NNI's PBT folders as kubelab checkpoints: `step-N` folders of the run's checkpoint folder,
    N the step this generation starts from and the one it ends at (the next generation's start)."""
    folder = os.environ.get("KUBELAB_CHECKPOINT_DIR", "")
    start = int(os.environ.get("KUBELAB_START_STEP") or 0)
    stop = int(os.environ.get("KUBELAB_STOP_STEP") or start + 1)
    save = os.path.join(folder, f"step-{stop:012d}")
    os.makedirs(save, exist_ok=True)
    return {"load_checkpoint_dir": os.path.join(folder, f"step-{start:012d}"), "save_checkpoint_dir": save}


def get_current_parameter(tag: str | None = None) -> Any:
    """The parameters last returned by `get_next_parameter()`, or one of them by name."""
    params = _state["params"]
    if params is None:
        return None
    return params if tag is None else params[tag]


def get_trial_id() -> str:
    return os.environ.get("KUBELAB_RUN_ID", "STANDALONE")


def get_experiment_id() -> str:
    return os.environ.get("KUBELAB_SWEEP_ID", "STANDALONE")


def get_sequence_id() -> int:
    trial = os.environ.get("KUBELAB_TRIAL", "")
    return int(trial) if trial.isdigit() else 0


def report_intermediate_result(metric: Any) -> None:
    """Record an intermediate result; steps count 0, 1, 2, … as NNI's sequence does."""
    step = _state["sequence"]
    _state["sequence"] = step + 1
    metrics = _metrics(metric, "report_intermediate_result")
    _write({"step": step, "metrics": metrics}, f"intermediate result {metric!r}")


def report_final_result(metric: Any) -> None:
    """Record the final result, the value the sweep's tuner optimizes."""
    _write({"final": True, "metrics": _metrics(metric, "report_final_result")}, f"final result {metric!r}")


def _metrics(metric: Any, caller: str) -> dict[str, float | int]:
    if isinstance(metric, dict):
        numbers = {str(k): n for k, n in ((k, number(v)) for k, v in metric.items()) if n is not None}
        if "default" not in numbers:
            keys = sorted(map(str, metric))
            _note(f"{caller}: a dict result needs a numeric 'default' key (the objective); got {keys}")
        return numbers
    value = number(metric)
    if value is None:
        _note(f"{caller}: the result must be a number or a dict with 'default', not {metric!r}")
        return {}
    return {"default": value}


def _write(entry: dict[str, Any], description: str) -> None:
    run_dir = os.environ.get("KUBELAB_RUN_DIR")
    if not run_dir:
        _note(description)  # NNI's standalone mode logs results instead of sending them
        return
    if not entry["metrics"]:
        return
    entry["time"] = round(time.time(), 3)
    rank = os.environ.get("RANK")
    if rank not in (None, "0"):
        entry["replica"] = int(rank)
    line = json.dumps(entry) + "\n"
    fd = os.open(os.path.join(run_dir, "metrics.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())  # one write: lines from several replicas never interleave
    finally:
        os.close(fd)


def _note(message: str) -> None:
    print(f"nni (kubelab): {message}", file=sys.stderr)


def trace(obj: Any = None, **kwargs: Any) -> Any:
    """NNI 2's `@nni.trace` (and `nni.trace(cls)(...)`): records how an object was built for
    NNI's serializer; kubelab does not serialize objects, so the object is returned unchanged."""
    if obj is None:
        return lambda inner: inner
    return obj
