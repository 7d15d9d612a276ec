"""`from nni.experiment import Experiment`: NNI's Python API, running a kubelab sweep.

Configured with NNI's attribute names (`experiment.config.trial_command`,
`config.search_space`, `config.tuner.name`, `config.tuner.class_args[...]`,
`config.max_trial_number`, `config.training_service.use_active_gpu`...), converted by the
same rules as an NNI config file (`kubelab.formats.nni_config`). `start()` creates the sweep
and returns; `run()` also waits for it (Ctrl-C stops it, as NNI's does); `stop()` stops it.
There is no NNI web UI: the port is accepted and unused; the sweep shows in the JupyterLab
sidebar and in `kubelab sweep show ID`. This module imports kubelab (it runs in the
notebook or script that starts the sweep, never inside a trial).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["AlgorithmConfig", "Experiment", "ExperimentConfig", "LocalConfig"]

_STATUS = {"Running": "RUNNING", "Succeeded": "DONE", "Stopped": "STOPPED", "Failed": "ERROR"}


class _Section:
    """Attributes set on it are its config; NNI's snake_case names, any order."""

    def to_dict(self) -> dict[str, Any]:
        result = {}
        for key, value in vars(self).items():
            if isinstance(value, _Section):
                value = value.to_dict() or None
            if value is not None and value != {}:
                result[key] = value
        return result


class AlgorithmConfig(_Section):
    def __init__(self, name: str | None = None, class_args: dict[str, Any] | None = None) -> None:
        self.name = name
        self.class_args: dict[str, Any] = dict(class_args or {})

    def to_dict(self) -> dict[str, Any]:
        return super().to_dict() if self.name else {}


class LocalConfig(_Section):
    def __init__(self, **settings: Any) -> None:
        self.platform = "local"
        for key, value in settings.items():
            setattr(self, key, value)


class ExperimentConfig(_Section):
    def __init__(self, training_service_platform: str | None = "local", **settings: Any) -> None:
        self.tuner = AlgorithmConfig()
        self.assessor = AlgorithmConfig()
        self.advisor = AlgorithmConfig()
        if training_service_platform in (None, "local"):
            self.training_service: Any = LocalConfig()
        else:  # refused when the sweep is created, with NNI's field name
            self.training_service = {"platform": training_service_platform}
        for key, value in settings.items():
            setattr(self, key, value)


class Experiment:
    """An NNI experiment whose trials kubelab runs: `Experiment('local')` or `Experiment(config)`."""

    def __init__(self, config_or_platform: ExperimentConfig | str | None = "local") -> None:
        if isinstance(config_or_platform, ExperimentConfig):
            self.config = config_or_platform
        else:
            self.config = ExperimentConfig(config_or_platform)
        self.id: str | None = None
        self._sweeps: Any = None

    def _service(self) -> Any:
        if self._sweeps is None:
            from kubelab.experiments import Experiments
            from kubelab.sweeps.service import Sweeps

            self._sweeps = Sweeps(Experiments())
        return self._sweeps

    def start(self, port: int = 8080, debug: bool = False, run_mode: Any = None) -> None:
        """Create the sweep (every field checked first) and return at once."""
        config = self.config.to_dict()
        record = self._service().create({"nni": config}, base_dir=Path.cwd())
        self.id = record["id"]
        print(
            f"nni (kubelab): started sweep {self.id}; `kubelab sweep show {self.id}` follows it",
            file=sys.stderr,
        )

    def run(self, port: int = 8080, wait_completion: bool = True, debug: bool = False) -> bool | None:
        """Start, then (with wait_completion) wait until the sweep ends; True when it succeeded."""
        self.start(port, debug)
        if not wait_completion:
            return None
        try:
            while self.get_status() == "RUNNING":
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.stop()
            raise
        return self.get_status() == "DONE"

    def stop(self) -> None:
        if self.id is not None and self.get_status() == "RUNNING":
            self._service().stop(self.id)

    def get_status(self) -> str:
        """NNI's names: RUNNING, DONE, STOPPED or ERROR."""
        if self.id is None:
            return "INITIALIZED"
        status: str = self._service().get(self.id)["status"]
        return _STATUS.get(status, status.upper())

    def export_data(self) -> list[dict[str, Any]]:
        """Each finished trial: its parameters, value and run id (NNI's TrialResult fields)."""
        if self.id is None:
            return []
        record = self._service().get(self.id)
        return [
            {"parameter": t.get("params"), "value": t.get("objective"), "trialJobId": t.get("id")}
            for t in record["trials"]
            if t.get("objective") is not None
        ]

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"nni (kubelab): Experiment.{name} is not provided; use start(), run(), "
            "stop(), get_status(), export_data() or `kubelab sweep`"
        )
