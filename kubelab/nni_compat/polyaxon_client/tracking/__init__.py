"""`from polyaxon_client.tracking import Experiment`: Polyaxon v0's tracking, recorded by kubelab."""

from __future__ import annotations

from typing import Any

from polyaxon._kubelab import Run, outputs_path, params


class Experiment(Run):
    """`Experiment().log_metrics(loss=0.1)`, `log_params`, `log_tags`, `get_outputs_path()`."""


def get_outputs_path() -> str:
    return outputs_path()


def get_data_paths() -> dict[str, Any]:
    """No data mounts are declared through Polyaxon here: the workspace is the data path."""
    return {}


def get_declarations() -> dict[str, Any]:
    return params()


get_params = get_declarations


def get_log_level() -> str:
    return "INFO"
