"""NNI's v1 experiment config (`authorName`, `trial.command`, `tuner.builtinTunerName`) as v2.

NNI 3.0 still reads v1 files by converting them to v2 first; this does the same, key by
key, so the v2 converter (`nni_config`) applies one set of rules to both. v1 keys that
only configured NNI's own manager are dropped as NNI drops them; keys for remote
platforms or custom algorithms are refused by name.
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import FieldError, ValidationError

# v1 key -> v2 key, for keys that only move.
RENAMED = {
    "experimentName": "experimentName",
    "trialConcurrency": "trialConcurrency",
    "maxExecDuration": "maxExperimentDuration",
    "maxTrialNum": "maxTrialNumber",
    "maxTrialDuration": "maxTrialDuration",
    "searchSpacePath": "searchSpaceFile",
    "searchSpace": "searchSpace",
    "useAnnotation": "useAnnotation",
    "nniManagerIp": "nniManagerIp",
    "logDir": "experimentWorkingDirectory",
    "logLevel": "logLevel",
    "debug": "debug",
}
# Settings of NNI's manager and web UI that NNI 3.0 drops when converting.
DROPPED = ("authorName", "multiThread", "versionCheck", "logCollection", "multiPhase")
ALGORITHM_NAMES = {
    "tuner": "builtinTunerName",
    "assessor": "builtinAssessorName",
    "advisor": "builtinAdvisorName",
}
TRIAL = {"command": "trialCommand", "codeDir": "trialCodeDirectory", "gpuNum": "trialGpuNumber"}
LOCAL = {
    "useActiveGpu": "useActiveGpu",
    "maxTrialNumPerGpu": "maxTrialNumberPerGpu",
    "gpuIndices": "gpuIndices",
}
V1_MARKERS = (
    "authorName",
    "trainingServicePlatform",
    "maxTrialNum",
    "maxExecDuration",
    "searchSpacePath",
    "localConfig",
)


def is_nni_v1(data: Any) -> bool:
    """True for a v1 config: v1-only keys, or a `trial` section holding the command."""
    if not isinstance(data, dict):
        return False
    if any(key in data for key in V1_MARKERS):
        return True
    if any(isinstance(data.get(k), dict) and name in data[k] for k, name in ALGORITHM_NAMES.items()):
        return True
    # `trial: {command}` is a kubelab sweep spec's too; NNI's v1 says trialConcurrency beside it.
    trial = data.get("trial")
    return isinstance(trial, dict) and "command" in trial and "trialConcurrency" in data


def v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """The v2 config a v1 config means, or ValidationError naming each key that cannot convert."""
    errors: list[FieldError] = []
    v2: dict[str, Any] = {}
    service: dict[str, Any] = {"platform": data.get("trainingServicePlatform", "local")}
    for key, value in data.items():
        if key in RENAMED:
            v2[RENAMED[key]] = value
        elif key in DROPPED or key == "trainingServicePlatform":
            continue
        elif key in ALGORITHM_NAMES:
            v2[key] = _algorithm(key, value, errors)
        elif key == "trial":
            _trial(value, v2, errors, service)
        elif key == "localConfig":
            _local(value, service, errors)
        elif key.endswith("Config") or key == "machineList":
            errors.append(
                FieldError(
                    key,
                    "remote NNI training services are not supported: kubelab runs "
                    "trials on its own backend (this machine or Kubernetes)",
                )
            )
        else:
            errors.append(FieldError(key, "unknown NNI v1 config key"))
    v2["trainingService"] = service
    if errors:
        raise ValidationError("invalid NNI experiment config (v1 format)", errors)
    return v2


def _algorithm(section: str, value: Any, errors: list[FieldError]) -> Any:
    if not isinstance(value, dict):
        errors.append(FieldError(section, "must be a mapping with builtin name and classArgs"))
        return None
    result: dict[str, Any] = {}
    for key, item in value.items():
        if key == ALGORITHM_NAMES[section]:
            result["name"] = item
        elif key == "classArgs":
            result["classArgs"] = item
        elif key in ("codeDir", "classFileName", "className"):
            errors.append(
                FieldError(f"{section}.{key}", "custom NNI algorithms are not supported; use a built-in name")
            )
        elif key == "gpuIndices":
            continue  # where NNI runs the tuner itself: Optuna's samplers run on the CPU
        else:
            errors.append(FieldError(f"{section}.{key}", f"unknown NNI v1 {section} key"))
    return result


def _trial(value: Any, v2: dict[str, Any], errors: list[FieldError], service: dict[str, Any]) -> None:
    if not isinstance(value, dict):
        errors.append(FieldError("trial", "must be a mapping with command and codeDir"))
        return
    adl = str(service.get("platform")).lower() == "adl"
    for key, item in value.items():
        if key in TRIAL:
            v2[TRIAL[key]] = item
        elif adl:  # AdaptDL keeps its settings in the trial section; v2 reads them from the service
            service[key] = item
        else:
            errors.append(
                FieldError(
                    f"trial.{key}",
                    "belongs to a remote NNI training service (image, memory, cpu...); not supported",
                )
            )


def _local(value: Any, service: dict[str, Any], errors: list[FieldError]) -> None:
    if not isinstance(value, dict):
        errors.append(FieldError("localConfig", "must be a mapping"))
        return
    for key, item in value.items():
        if key not in LOCAL:
            errors.append(FieldError(f"localConfig.{key}", "unknown NNI v1 localConfig key"))
        elif key == "gpuIndices" and isinstance(item, str):
            service["gpuIndices"] = [int(i) for i in item.split(",") if i.strip().isdigit()]
        else:
            service[LOCAL[key]] = item
