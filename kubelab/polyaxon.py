"""Polyaxon experiment files (`version: 1`, `kind: experiment`) as kubelab specs.

A user's existing polyaxonfile runs as is: this maps its fields onto ours and refuses
the ones kubelab cannot honour, naming them, rather than dropping them silently.
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean

TOP = ("version", "kind", "name", "description", "tags", "params", "declarations", "inputs",
       "outputs", "environment", "build", "run", "framework", "logging")
ENVIRONMENT = ("resources", "node_selector", "tolerations", "affinity", "replicas", "pytorch",
               "tensorflow", "paddle", "max_restarts", "env_vars")


def is_polyaxon(data: Any) -> bool:
    return isinstance(data, dict) and "version" in data and data.get("kind") in ("experiment", "job")


def convert(data: dict[str, Any]) -> dict[str, Any]:
    problems: list[FieldError] = []
    for key in data:
        if key not in TOP:
            problems.append(FieldError(key, "unknown polyaxonfile field" + did_you_mean(key, TOP)))
    spec: dict[str, Any] = {}
    for key in ("name", "description", "tags"):
        if key in data:
            spec[key] = data[key]
    params = data.get("params") or data.get("declarations")
    if params is not None:
        spec["params"] = params
    if data.get("inputs") is not None:
        inputs = data["inputs"]
        spec["inputs"] = [_input(i) for i in inputs] if isinstance(inputs, list) else inputs
    run = data.get("run") or {}
    if isinstance(run, dict):
        command = run.get("cmd")
        spec["command"] = " && ".join(command) if isinstance(command, list) else command
    build = data.get("build") or {}
    if isinstance(build, dict) and build.get("image"):
        spec["image"] = build["image"]
    environment = data.get("environment") or {}
    if isinstance(environment, dict):
        for key in environment:
            if key not in ENVIRONMENT:
                hint = did_you_mean(key, ENVIRONMENT)
                problems.append(FieldError(f"environment.{key}", "unknown field" + hint))
        _environment(environment, spec, problems)
    if problems:
        raise ValidationError("invalid polyaxonfile", problems)
    return spec


def _input(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    item = dict(item)
    if "is_optional" in item:
        item["optional"] = item.pop("is_optional")
    if item.get("type") in ("string",):
        item["type"] = "str"
    if item.get("type") in ("boolean",):
        item["type"] = "bool"
    return item


def _environment(env: dict[str, Any], spec: dict[str, Any], problems: list[FieldError]) -> None:
    resources = env.get("resources") or {}
    out: dict[str, Any] = {}
    for name, target in (("cpu", "cpu"), ("memory", "memory"), ("gpu", "gpus")):
        entry = resources.get(name)
        if entry is None:
            continue
        if not isinstance(entry, dict):
            problems.append(FieldError(f"environment.resources.{name}", "must have requests and/or limits"))
            continue
        value = entry.get("limits", entry.get("requests"))
        if name == "memory" and isinstance(value, (int, float)):
            value = f"{int(value)}Mi"  # polyaxon v0 counts memory in megabytes
        out[target] = value
    if out:
        spec["resources"] = out
    for key in ("node_selector", "tolerations"):
        if env.get(key) is not None:
            spec[key] = env[key]
    if env.get("env_vars"):
        spec["env"] = dict(env["env_vars"]) if isinstance(env["env_vars"], dict) else {
            k: v for k, v in env["env_vars"]}
    if env.get("max_restarts") is not None:
        spec["retries"] = env["max_restarts"]
    for framework in ("pytorch", "tensorflow", "paddle"):
        section = env.get(framework)
        if isinstance(section, dict):
            spec["framework"] = framework
            spec["replicas"] = int(section.get("n_workers", 0)) + 1
            if framework == "tensorflow" and section.get("n_ps"):
                spec["parameter_servers"] = section["n_ps"]
