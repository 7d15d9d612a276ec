"""Converting an NNI experiment config (v2, YAML or JSON) into a sweep spec mapping.

NNI reads its config keys ignoring case and underscores (`trialCommand` = `trial_command`),
so this does too. The result is a plain mapping for `SweepSpec.parse`; nothing NNI says is
dropped silently: keys with no meaning here are either harmless (listed in `IGNORED`) or
refused with the reason. Trials run like NNI's: `trialCommand` in a shell, with the working
directory `trialCodeDirectory` (relative to the config file), reading their parameters
from the environment (`parameter_style: env`), never from appended arguments.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.formats.nni_v1 import is_nni_v1, v1_to_v2
from kubelab.gpu_share import parse_gpu_indices
from kubelab.sweeps.config_files import read_document

FIELDS = (
    "experimentName",
    "searchSpaceFile",
    "searchSpace",
    "trialCommand",
    "trialCodeDirectory",
    "trialConcurrency",
    "trialGpuNumber",
    "maxExperimentDuration",
    "maxTrialNumber",
    "maxTrialDuration",
    "tuner",
    "assessor",
    "advisor",
    "trainingService",
    "useAnnotation",
    "experimentType",
)
# Settings of NNI's own manager process; they change nothing about what the sweep does.
IGNORED = ("nniManagerIp", "debug", "logLevel", "experimentWorkingDirectory", "tunerGpuIndices")
# NNI's own keys with no equivalent here: refused under NNI's name, with the reason.
UNSUPPORTED = {
    "sharedStorage": "NNI's shared storage (NFS, Azure Blob) is not mounted by kubelab: trials share "
    "your workspace, where the command runs; read and write data there",
}
_CANONICAL = {name.lower(): name for name in FIELDS + IGNORED + tuple(UNSUPPORTED)}
_BOHB_MODEL_ARGS = (
    "min_points_in_model",
    "top_n_percent",
    "num_samples",
    "random_fraction",
    "bandwidth_factor",
    "min_bandwidth",
)


def load_nni_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an NNI config file and convert it; relative paths are relative to the file."""
    data, origin = read_document(path, "config")
    return nni_to_sweep(data, base_dir=origin.parent if origin else None)


def nni_to_sweep(data: Any, base_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """An NNI experiment config (a mapping) → a sweep spec mapping, or ValidationError."""
    return _Converter(Path(base_dir) if base_dir is not None else Path.cwd()).convert(data)


ADAPTDL_REFUSED = {
    "namespace": "runs go to your own namespace (or this machine); remove namespace",
    "imagepullsecrets": "pull secrets are your admin's (the hub's image settings); remove imagePullSecrets",
    "nfs": "shared folders come from your project group's volume mounts; remove nfs",
}


def adaptdl_trial(service: dict[str, Any], where: str, fail: Callable[[str, str], None]) -> dict[str, Any]:
    """What NNI's AdaptDL training service (`platform: adl`) means for each trial: a preemptible
    run (priority low) that resumes from `kubelab.checkpoint_dir()` after a preemption, in the
    given image with the given CPU and memory. The checkpoint claim's class and size are not
    needed (checkpoints live in the run's folder). AdaptDL's adaptive resizing is refused: a
    trial is preempted and resumed whole, never resized."""
    trial: dict[str, Any] = {"priority": "low", "preemptible": True}
    resources: dict[str, Any] = {}
    for raw, value in service.items():
        key, path = _key(raw), f"{where}.{raw}"
        if key == "platform":
            continue
        if key == "adaptive":
            if value is True:
                fail(
                    path,
                    "AdaptDL resizes a trial through its own library (adaptdl.torch), which "
                    "kubelab does not run; kubelab resumes preempted trials from their "
                    "checkpoints, and resizes torchrun trials given replicas: {min, max} "
                    "(docs/elastic.md): set adaptive: false",
                )
            elif value is not False:
                fail(path, f"must be true or false, not {value!r}")
        elif key == "checkpoint":
            if not isinstance(value, dict) or set(map(_key, value)) - {"storageclass", "storagesize"}:
                fail(path, "must be a mapping of storageClass and storageSize")
        elif key == "image":
            trial["image"] = value
        elif key == "cpunum":
            resources["cpu"] = str(value)
        elif key == "memorysize":
            resources["memory"] = str(value).replace("GB", "G").replace("MB", "M")
        elif key in ADAPTDL_REFUSED:
            fail(path, ADAPTDL_REFUSED[key])
        else:
            known = ("platform", "adaptive", "checkpoint", "image", "cpuNum", "memorySize")
            fail(path, "unknown AdaptDL training service setting" + did_you_mean(str(raw), known))
    if resources:
        trial["resources"] = resources
    return trial


def _key(name: Any) -> str:
    return str(name).lower().replace("_", "")


class _Converter:
    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.errors: list[FieldError] = []
        self.directions: dict[str, str] = {}
        self.budget: int | float | None = None  # Hyperband/BOHB's TRIAL_BUDGET
        self.trials_per_gpu = 1  # the local training service's maxTrialNumberPerGpu
        self.gpu_indices: list[int] | None = None  # and its gpuIndices
        self.adaptdl: dict[str, Any] | None = None  # what AdaptDL's training service adds to a trial
        self.v1 = False  # a v1 file: AdaptDL's settings were written in its `trial` section

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    def convert(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ValidationError("invalid NNI experiment config", [FieldError("", "must be a mapping")])
        if is_nni_v1(data):
            data = v1_to_v2(data)  # as NNI 3.0 reads a v1 file
            self.v1 = True
        config: dict[str, Any] = {}
        for raw, value in data.items():
            name = _CANONICAL.get(_key(raw))
            if name is None:
                self.fail(str(raw), "unknown NNI config key" + did_you_mean(str(raw), FIELDS))
            elif name in UNSUPPORTED:
                self.fail(name, UNSUPPORTED[name])
            elif name not in IGNORED:
                config[name] = value
        sweep: dict[str, Any] = {"parameter_style": "env"}
        if config.get("experimentName") is not None:
            sweep["name"] = config["experimentName"]
        self.checks(config)
        tuner_name = self.tuner(config, sweep)
        self.space(config, sweep, tuner_name)
        if config.get("assessor") is not None:
            name, args = self.algorithm(config["assessor"], "assessor")
            sweep["early_stopping"] = {"name": name, "args": args}
        direction = self.direction()
        sweep["objective"] = {"metric": "default", "direction": direction}
        for source, target in (
            ("maxTrialNumber", "max_trials"),
            ("trialConcurrency", "concurrency"),
            ("maxExperimentDuration", "max_duration"),
        ):
            if config.get(source) is not None:
                sweep[target] = config[source]
        if config.get("maxTrialNumber") is None and config.get("maxExperimentDuration") is None:
            sweep["until_stopped"] = True  # NNI runs such an experiment until it is stopped
        sweep["trial"] = self.trial(config)
        if self.trials_per_gpu > 1 and config.get("trialGpuNumber"):
            # NNI places up to maxTrialNumberPerGpu trials on each GPU; trials without GPUs
            # (trialGpuNumber 0) are not placed on GPUs at all, so the setting changes nothing.
            if config["trialGpuNumber"] != 1:
                self.fail(
                    "trainingService.maxTrialNumberPerGpu",
                    "shares one GPU among trials, so trialGpuNumber must be 1, "
                    f"not {config['trialGpuNumber']!r}",
                )
            sweep["trials_per_gpu"] = self.trials_per_gpu
        if self.budget is not None:
            sweep["trial"].setdefault("env", {})["KUBELAB_NNI_TRIAL_BUDGET"] = str(self.budget)
        if self.errors:
            raise ValidationError("invalid NNI experiment config", self.errors)
        return sweep

    def checks(self, config: dict[str, Any]) -> None:
        if config.get("useAnnotation"):
            self.fail(
                "useAnnotation",
                "NNI annotations are not supported; call nni.get_next_parameter() "
                "in the trial instead (kubelab provides the nni module to trials)",
            )
        kind = config.get("experimentType", "hpo")
        if kind != "hpo":
            self.fail("experimentType", f"only hpo experiments convert, not {kind!r}")
        services = config.get("trainingService")
        for index, service in enumerate(services if isinstance(services, list) else [services]):
            if service is None:
                continue
            where = f"trainingService[{index}]" if isinstance(services, list) else "trainingService"
            platform = service.get("platform") if isinstance(service, dict) else None
            if str(platform).lower() == "adl":
                self.adaptdl = adaptdl_trial(service, "trial" if self.v1 else where, self.fail)
            elif str(platform).lower() != "local":
                self.fail(
                    f"{where}.platform",
                    f"must be local or adl, not {platform!r}: kubelab runs trials on its own "
                    "backend (this machine or Kubernetes); remove trainingService",
                )
            else:
                self.local_service(service, where)

    def local_service(self, service: dict[str, Any], where: str) -> None:
        """NNI's local training service settings: each honoured, or refused with the reason."""
        for raw, value in service.items():
            key = _key(raw)
            path = f"{where}.{raw}"
            if key in ("platform", "reusemode") and not (key == "reusemode" and value):
                continue  # reuseMode false: a new process per trial, as kubelab runs them
            if key == "reusemode":
                self.fail(path, "trials always run in fresh processes here; remove reuseMode")
            elif key == "useactivegpu":
                # kubelab's machine-wide ledger hands GPUs to kubelab's runs; a GPU another
                # program uses is not seen as busy, which is NNI's `useActiveGpu: true`. Both
                # values run (docs/gpus.md says what false cannot promise).
                if not isinstance(value, bool):
                    self.fail(path, f"must be true or false, not {value!r}")
            elif key == "maxtrialnumberpergpu":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    self.fail(path, f"must be a whole number of trials of at least 1, not {value!r}")
                else:
                    self.trials_per_gpu = value
            elif key == "gpuindices":
                indices, problem = parse_gpu_indices(value)
                if problem:
                    self.fail(path, problem)
                else:
                    self.gpu_indices = indices
            else:
                known = ("platform", "useActiveGpu", "maxTrialNumberPerGpu", "gpuIndices", "reuseMode")
                self.fail(path, "unknown local training service setting" + did_you_mean(str(raw), known))

    def algorithm(self, value: Any, path: str) -> tuple[str, dict[str, Any]]:
        """`{name, classArgs}` → (name, args without optimize_mode, which becomes the objective)."""
        if not isinstance(value, dict):
            self.fail(path, "must be a mapping with name and classArgs")
            return "", {}
        allowed = {"name": "name", "classargs": "classArgs"}
        for raw in value:
            if _key(raw) in ("codedirectory", "classname", "classfilename"):
                self.fail(f"{path}.{raw}", "custom NNI algorithms are not supported; use a built-in name")
            elif _key(raw) not in allowed:
                self.fail(f"{path}.{raw}", "unknown field" + did_you_mean(str(raw), allowed.values()))
        fields = {allowed.get(_key(k)): v for k, v in value.items()}
        name = fields.get("name")
        if not isinstance(name, str) or not name:
            self.fail(f"{path}.name", "is required")
            return "", {}
        args = dict(fields.get("classArgs") or {})
        mode = args.pop("optimize_mode", None)
        if mode is not None:
            self.directions[f"{path}.classArgs.optimize_mode"] = mode
        return name, args

    def tuner(self, config: dict[str, Any], sweep: dict[str, Any]) -> str:
        tuner, advisor = config.get("tuner"), config.get("advisor")
        if tuner is not None and advisor is not None:
            self.fail("advisor", "give a tuner or an advisor, not both")
        if advisor is not None:
            return self.advisor(advisor, sweep)
        if tuner is None:
            self.fail("tuner", "is required (for example {name: TPE, classArgs: {optimize_mode: maximize}})")
            return ""
        name, args = self.algorithm(tuner, "tuner")
        sweep["tuner"] = {"name": name, "args": args}
        return _key(name)

    def advisor(self, advisor: Any, sweep: dict[str, Any]) -> str:
        """NNI's Hyperband is random search with Hyperband stopping; BOHB is TPE with it."""
        name, args = self.algorithm(advisor, "advisor")
        kind = name.lower()
        if kind not in ("hyperband", "bohb"):
            self.fail("advisor.name", f"only Hyperband and BOHB advisors convert, not {name!r}")
            return ""
        args.pop("exec_mode", None)  # serial or parallel: trials here always run up to concurrency
        for model_arg in _BOHB_MODEL_ARGS:
            if model_arg in args:
                args.pop(model_arg)
                self.fail(
                    f"advisor.classArgs.{model_arg}",
                    "BOHB's model argument has no equivalent; Optuna's TPE sets its own",
                )
        # NNI's defaults: Hyperband R=60, BOHB max_budget=3. Optuna's Hyperband runs each trial
        # up to this budget (pruning the weak ones early), so TRIAL_BUDGET is the largest one.
        budget_key = "R" if kind == "hyperband" else "max_budget"
        args.setdefault(budget_key, 60 if kind == "hyperband" else 3)
        if kind == "bohb":
            args.setdefault("min_budget", 1)
        self.budget = args[budget_key]
        sweep["tuner"] = {"name": "random" if kind == "hyperband" else "tpe", "args": {}}
        sweep["early_stopping"] = {"name": "hyperband", "args": args}
        tuner: str = sweep["tuner"]["name"]
        return tuner

    def space(self, config: dict[str, Any], sweep: dict[str, Any], tuner_name: str) -> None:
        inline, source = config.get("searchSpace"), config.get("searchSpaceFile")
        if (inline is None) == (source is None):
            self.fail("searchSpaceFile", "give exactly one of searchSpaceFile or searchSpace")
            return
        path = str(self.resolve(source)) if source is not None else None
        if tuner_name not in ("batchtuner", "batch"):
            if path is not None:
                sweep["space_file"] = path
            else:
                sweep["space"] = inline
            return
        if path is not None:
            try:
                inline, _ = read_document(Path(path), "searchSpaceFile")
            except ValidationError as exc:
                self.errors += exc.fields
                return
        combined = inline.get("combine_params") if isinstance(inline, dict) else None
        configs = combined.get("_value") if isinstance(combined, dict) else None
        if not isinstance(configs, list) or not isinstance(inline, dict) or len(inline) != 1:
            self.fail(
                "searchSpace",
                "BatchTuner expects {combine_params: {_type: choice, _value: [configurations]}}",
            )
            return
        sweep["batch"] = configs

    def direction(self) -> str:
        modes = set(self.directions.values())
        if len(modes) > 1:
            detail = ", ".join(f"{path} is {mode}" for path, mode in self.directions.items())
            self.fail(next(iter(self.directions)), f"optimize_mode values disagree: {detail}")
        return next(iter(modes)) if len(modes) == 1 else "minimize"

    def trial(self, config: dict[str, Any]) -> dict[str, Any]:
        trial: dict[str, Any] = {}
        if config.get("trialCommand") is None:
            self.fail("trialCommand", "is required")
        else:
            trial["command"] = config["trialCommand"]
        code = config.get("trialCodeDirectory", ".")
        if not isinstance(code, str):
            self.fail("trialCodeDirectory", f"must be a directory path, not {code!r}")
        else:
            directory = str(self.resolve(code))
            trial["workdir"] = directory
            trial["code"] = {"path": directory}
        gpus = config.get("trialGpuNumber")
        if gpus:
            trial["resources"] = {"gpus": gpus}
            if self.gpu_indices is not None:
                trial["resources"]["gpu_indices"] = self.gpu_indices
        if config.get("maxTrialDuration") is not None:
            trial["timeout"] = config["maxTrialDuration"]
        if self.adaptdl is not None:
            resources = {**trial.get("resources", {}), **self.adaptdl.pop("resources", {})}
            trial.update(self.adaptdl)
            if resources:
                trial["resources"] = resources
        return trial

    def resolve(self, path: Any) -> Path:
        resolved = Path(str(path)).expanduser()
        return resolved if resolved.is_absolute() else (self.base_dir / resolved).resolve()
