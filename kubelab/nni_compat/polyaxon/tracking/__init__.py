"""`from polyaxon import tracking`: Polyaxon v1's module-level tracking API, recorded by kubelab.

`tracking.init()` starts (or here: names) the run; `log_metrics`, `log_inputs`,
`log_outputs`, `log_tags`, `log_artifact` record into the run directory.
"""

from __future__ import annotations

from typing import Any

from polyaxon._kubelab import Run

TRACKING_RUN: Run | None = None


def init(*args: Any, **kwargs: Any) -> Run:
    """Any of Polyaxon's arguments are accepted: the run is always the kubelab run around the code."""
    global TRACKING_RUN
    TRACKING_RUN = Run(*args, **kwargs)
    return TRACKING_RUN


def _run() -> Run:
    return TRACKING_RUN if TRACKING_RUN is not None else init()


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_run(), name)  # log_metrics, log_outputs, ...; unknown names say so
