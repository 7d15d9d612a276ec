"""The sweep spec: a search space, a tuner, early stopping, limits and a trial template.

`SweepSpec.parse(data)` validates like `ExperimentSpec.parse`: every problem at once as
`field.path: reason`, unknown fields refused with a suggestion. The trial template is an
experiment spec checked with a representative value for each search-space name, so
`{{ lr }}` in its command is not an undefined variable. Needs no Optuna.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.gpu_share import MAX_SHARES, shares_of
from kubelab.quantity import parse_duration
from kubelab.spec import ExperimentSpec
from kubelab.sweeps.population import Settings
from kubelab.sweeps.pruners import PrunerChoice, check_pruner
from kubelab.sweeps.space import Scalar, SearchSpace, load_space
from kubelab.sweeps.tuner_catalog import TunerChoice, check_batch, check_tuner
from kubelab.templating import format_value, shell_word

PARAMETER_STYLES = ("all", "env")
DIRECTIONS = ("minimize", "maximize")


@dataclass
class Objective:
    metric: str = "default"
    direction: str = "minimize"


@dataclass
class SweepSpec:
    name: str = ""
    space: SearchSpace = field(default_factory=SearchSpace.empty)
    space_file: str | None = None
    tuner: TunerChoice = field(default_factory=lambda: TunerChoice("tpe"))
    early_stopping: PrunerChoice = field(default_factory=PrunerChoice)
    objective: Objective = field(default_factory=Objective)
    max_trials: int | None = None
    concurrency: int = 1
    trials_per_gpu: int = 1
    """Trials that share one GPU (each gets 1/n of it; NNI's maxTrialNumberPerGpu)."""
    max_failed_trials: int | None = None
    max_duration: float | None = None
    parameter_style: str = "all"
    trial: dict[str, Any] = field(default_factory=dict)
    batch: list[dict[str, Any]] | None = None
    # NNI runs a config without maxTrialNumber/maxExperimentDuration until it is stopped.
    until_stopped: bool = False
    # Polyaxon's early stopping: the sweep ends once a trial's objective reaches this value.
    stop_at: float | None = None

    @classmethod
    def parse(cls, data: Any, base_dir: str | Path | None = None) -> SweepSpec:
        """Validate a mapping into a sweep spec; `space_file` is read relative to `base_dir`."""
        return _Parser(base_dir).spec(data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the space inline; `parse(to_dict())` gives the spec back."""
        return {
            "name": self.name,
            "space": self.space.to_dict() if self.batch is None else None,
            "tuner": self.tuner.to_dict(),
            "early_stopping": self.early_stopping.to_dict(),
            "objective": {"metric": self.objective.metric, "direction": self.objective.direction},
            "max_trials": self.max_trials,
            "concurrency": self.concurrency,
            "trials_per_gpu": self.trials_per_gpu,
            "max_failed_trials": self.max_failed_trials,
            "max_duration": self.max_duration,
            "parameter_style": self.parameter_style,
            "trial": copy.deepcopy(self.trial),
            "batch": copy.deepcopy(self.batch),
            "until_stopped": self.until_stopped,
            "stop_at": self.stop_at,
        }

    def make_tuner(self, storage: Any = None, study_name: str | None = None) -> Any:
        """The Tuner for this sweep (imports Optuna); PBT's hands out generations (pbt_tuner.py)."""
        from kubelab.sweeps.tuners import Tuner

        if self.tuner.kind.walks == "population":
            from kubelab.sweeps.pbt_tuner import PopulationTuner as Tuner
        return Tuner(
            self.space,
            self.tuner,
            storage=storage,
            study_name=study_name,
            direction=self.objective.direction,
            pruner=self.early_stopping,
            batch=self.batch,
        )

    def trial_spec(self, flat_params: dict[str, Scalar]) -> ExperimentSpec:
        """The experiment spec of one trial: the template with the trial's parameters.

        They become the spec's params (so `KUBELAB_PARAMS` and `{{ name }}` see them) and, with
        parameter_style `all`, `--name=value` arguments appended to the command.
        """
        data = copy.deepcopy(self.trial)
        if not data.get("name") and self.name:
            data["name"] = self.name  # trials read as "<sweep> #3", not "python #3"
        data["params"] = {**(data.get("params") or {}), **flat_params}
        if self.parameter_style == "all" and data.get("command"):
            data["command"] = trial_command(data["command"], flat_params)
        return ExperimentSpec.parse(data)


def trial_command(command: list[str] | str, params: dict[str, Scalar]) -> list[str] | str:
    """`command` with `--name=value` per parameter: list items, or shell-quoted words for a string."""
    args = [f"--{name}={format_value(value)}" for name, value in params.items()]
    if isinstance(command, str):
        return " ".join([command, *(shell_word(arg) for arg in args)]) if args else command
    return [*command, *args]


class _Parser:
    def __init__(self, base_dir: str | Path | None) -> None:
        self.base_dir = Path(base_dir) if base_dir is not None else None
        self.errors: list[FieldError] = []

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    def spec(self, data: Any) -> SweepSpec:
        if not isinstance(data, dict):
            raise ValidationError(
                "invalid sweep spec", [FieldError("", "the sweep spec must be a mapping of fields")]
            )
        allowed = tuple(SweepSpec.__dataclass_fields__)
        for key in data:
            if key not in allowed:
                self.fail(str(key), "unknown field" + did_you_mean(str(key), allowed))
        spec = SweepSpec()
        spec.name = self.text(data, "name")
        tuner, problems = check_tuner(data.get("tuner"))
        self.errors += problems
        spec.tuner = tuner
        pruner, problems = check_pruner(data.get("early_stopping"))
        self.errors += problems
        spec.early_stopping = pruner
        spec.objective = self.objective(data.get("objective"))
        spec.max_trials = self.count(data, "max_trials", minimum=1)
        spec.concurrency = self.count(data, "concurrency", minimum=1) or 1
        spec.trials_per_gpu = self.count(data, "trials_per_gpu", minimum=1) or 1
        spec.max_failed_trials = self.count(data, "max_failed_trials", minimum=0)
        spec.max_duration = self.duration(data.get("max_duration"))
        spec.parameter_style = self.style(data.get("parameter_style"))
        spec.space, spec.space_file = self.space(data, tuner)
        if tuner.kind.walks == "batch":
            spec.batch, problems = check_batch(data.get("batch"))
            self.errors += problems
        elif data.get("batch") is not None:
            self.fail("batch", "configurations are only for the batch tuner")
        if not problems_at(self.errors, ("tuner", "space", "space_file")):
            self.errors += tuner.check(spec.space, root="space_file" if spec.space_file else "space")
        self.directions(spec)
        spec.until_stopped = self.flag(data, "until_stopped")
        spec.stop_at = self.threshold(data.get("stop_at"))
        unbounded = data.get("max_trials") is None and data.get("max_duration") is None
        if unbounded and not tuner.exhaustive and not spec.until_stopped:
            self.fail(
                "max_trials",
                f"set max_trials or max_duration: {tuner.name} never runs out of suggestions "
                "(or until_stopped: true to run until `kubelab sweep stop`)",
            )
        self.generations(spec)
        spec.trial = self.shared_gpu(self.trial(data.get("trial"), spec), spec.trials_per_gpu)
        if self.errors:
            raise ValidationError("invalid sweep spec", self.errors)
        return spec

    def text(self, data: dict[str, Any], key: str) -> str:
        value = data.get(key) or ""
        if not isinstance(value, str) or len(value) > 200:
            self.fail(key, "must be a string of at most 200 characters")
            return ""
        return value

    def flag(self, data: dict[str, Any], key: str) -> bool:
        value = data.get(key, False)
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {value!r}")
            return False
        return value

    def threshold(self, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            reason = f"must be a finite number (the objective value that ends the sweep), not {value!r}"
            self.fail("stop_at", reason)
            return None
        return float(value)

    def count(self, data: dict[str, Any], key: str, minimum: int) -> int | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be a whole number, not {value!r}")
            return None
        if value < minimum:
            self.fail(key, f"must be at least {minimum}, not {value}")
            return None
        return value

    def duration(self, value: Any) -> float | None:
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail("max_duration", str(exc))
            return None

    def style(self, value: Any) -> str:
        if value is None:
            return "all"
        if value not in PARAMETER_STYLES:
            hint = did_you_mean(str(value), PARAMETER_STYLES)
            self.fail(
                "parameter_style",
                f"must be all (arguments, KUBELAB_PARAMS and {{{{ name }}}}) or env "
                f"(no arguments appended), not {value!r}{hint}",
            )
            return "all"
        style: str = value
        return style

    def objective(self, value: Any) -> Objective:
        if value is None:
            return Objective()
        if not isinstance(value, dict):
            self.fail("objective", "must be a mapping with metric and direction")
            return Objective()
        for key in value:
            if key not in ("metric", "direction"):
                self.fail(
                    f"objective.{key}", "unknown field" + did_you_mean(str(key), ("metric", "direction"))
                )
        metric = value.get("metric", "default")
        if not isinstance(metric, str) or not metric:
            self.fail("objective.metric", f"must be a metric name such as 'loss', not {metric!r}")
            metric = "default"
        direction = value.get("direction", "minimize")
        if direction not in DIRECTIONS:
            self.fail(
                "objective.direction",
                f"must be minimize or maximize, not {direction!r}" + did_you_mean(str(direction), DIRECTIONS),
            )
            direction = "minimize"
        return Objective(metric, direction)

    def directions(self, spec: SweepSpec) -> None:
        for path, said in (
            ("tuner.args.optimize_mode", spec.tuner.direction),
            ("early_stopping.args.optimize_mode", spec.early_stopping.direction),
        ):
            if said and said != spec.objective.direction:
                self.fail(path, f"says {said} but objective.direction is {spec.objective.direction}")

    def space(self, data: dict[str, Any], tuner: TunerChoice) -> tuple[SearchSpace, str | None]:
        inline, source = data.get("space"), data.get("space_file")
        if tuner.kind.walks == "batch":
            for key in ("space", "space_file"):
                if data.get(key) is not None:
                    self.fail(key, "the batch tuner runs the configurations listed in batch; leave it out")
            return SearchSpace.empty(), None
        if (inline is None) == (source is None):
            self.fail("space", "give exactly one of space (a mapping) or space_file (a JSON or YAML file)")
            return SearchSpace.empty(), None
        try:
            if inline is not None:
                return SearchSpace.parse(inline, "space"), None
            if not isinstance(source, str) or not source:
                self.fail("space_file", f"must be a file path, not {source!r}")
                return SearchSpace.empty(), None
            path = Path(source).expanduser()
            if self.base_dir is not None and not path.is_absolute():
                path = self.base_dir / path
            return load_space(path, "space_file"), str(path)
        except ValidationError as exc:
            self.errors += exc.fields
            return SearchSpace.empty(), None

    def trial(self, value: Any, spec: SweepSpec) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail("trial", "is required: the experiment spec each trial runs (at least a command)")
            return {}
        names = set(spec.space.flat_names()) if spec.batch is None else {n for c in spec.batch for n in c}
        given = value.get("params")
        fixed: dict[str, Any] = given if isinstance(given, dict) else {}
        for name in fixed:
            if name in names:
                self.fail(f"trial.params.{name}", "is also a search-space parameter; the sweep sets it")
        sample = spec.space.representative()
        for config in reversed(spec.batch or []):  # the first configuration that names it wins
            sample.update(config)
        data = copy.deepcopy(value)
        data["params"] = {**fixed, **sample}
        try:
            ExperimentSpec.parse(data)
        except ValidationError as exc:
            for problem in exc.fields:
                name = problem.path.removeprefix("params.")
                if problem.path.startswith("params.") and name in names:
                    self.fail(
                        f"trial.inputs ({name})",
                        f"values of search-space parameter '{name}' do not fit "
                        f"the trial's input: {problem.reason}",
                    )
                else:
                    self.fail(f"trial.{problem.path}" if problem.path else "trial", problem.reason)
        return copy.deepcopy(value)

    def generations(self, spec: SweepSpec) -> None:
        """PBT copies from one generation into the next: max_trials must allow two of them."""
        size = Settings.of(spec.tuner.kwargs).population_size
        if spec.tuner.kind.walks != "population" or spec.max_trials is None or spec.max_trials >= 2 * size:
            return
        self.fail(
            "max_trials",
            f"must be at least {2 * size} for pbt: two generations of population_size ({size}) "
            "trials, so the second can copy from the first",
        )

    def shared_gpu(self, trial: dict[str, Any], shares: int) -> dict[str, Any]:
        """With `trials_per_gpu: n` each trial asks for 1/n of a GPU (whole GPUs cannot be split)."""
        if shares == 1:
            return trial
        if shares > MAX_SHARES:
            self.fail("trials_per_gpu", f"must be at most {MAX_SHARES}, not {shares}")
            return trial
        resources = trial.get("resources")
        resources = dict(resources) if isinstance(resources, dict) else {}
        gpus = resources.get("gpus")
        if gpus not in (None, 0, 1) and not (isinstance(gpus, float) and shares_of(gpus) == shares):
            self.fail(
                "trials_per_gpu",
                f"shares one GPU among {shares} trials, so trial.resources.gpus must be 1 (or unset), "
                f"not {gpus!r}",
            )
            return trial
        resources["gpus"] = 1 / shares
        return {**trial, "resources": resources}


def problems_at(errors: list[FieldError], roots: tuple[str, ...]) -> bool:
    return any(e.path == root or e.path.startswith(root + ".") for e in errors for root in roots)
