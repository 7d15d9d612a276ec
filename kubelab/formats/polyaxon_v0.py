"""Polyaxon v0 experiment files (`version: 1`, `kind: experiment`) as kubelab specs.

A user's existing polyaxonfile runs as is: this maps its fields onto ours and refuses
the ones kubelab cannot honour, naming them, rather than dropping them silently.
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.formats.build_steps import environment_of
from kubelab.spec import FRAMEWORKS as SPEC_FRAMEWORKS

TOP = (
    "version",
    "kind",
    "name",
    "description",
    "tags",
    "params",
    "declarations",
    "inputs",
    "outputs",
    "environment",
    "build",
    "run",
    "framework",
    "backend",
    "logging",
)
ENVIRONMENT = (
    "resources",
    "node_selector",
    "tolerations",
    "affinity",
    "replicas",
    "pytorch",
    "tensorflow",
    "paddle",
    "max_restarts",
    "env_vars",
)
FRAMEWORKS = {name: name for name in SPEC_FRAMEWORKS if name != "none"}  # Polyaxon v0 names them alike
REFUSED_FRAMEWORKS = {
    "horovod": "Horovod needs an MPI launcher, which kubelab does not provide; use framework pytorch "
    "(torchrun-style ranks) or tensorflow",
    "mpi": "MPI jobs need an MPI launcher, which kubelab does not provide; use framework pytorch",
}
# Polyaxon v0's `backend`: who runs a distributed experiment (kubeflow -> its operators)
BACKENDS = {"native": "job", "kubeflow": "kubeflow"}


def is_polyaxon(data: Any) -> bool:
    return isinstance(data, dict) and "version" in data and data.get("kind") in ("experiment", "job")


def sanitize_cmd(cmd: Any) -> Any:
    """`run.cmd` as Polyaxon runs it: words split on whitespace, `\\` continuations dropped.

    YAML folds a multi-line plain scalar into one line, keeping each line's trailing
    backslash as a word of its own; Polyaxon strips backslashes at the edges of words,
    drops words that were only a backslash, and joins a list of commands with `&&`.
    """

    def one(text: Any) -> Any:
        if not isinstance(text, str):
            return text
        words = [w.strip().strip("\\") for w in text.split() if w and w != "\\"]
        return " ".join(w for w in words if w)

    if isinstance(cmd, list):
        return " && ".join(str(one(c)) for c in cmd)
    return one(cmd)


def convert(data: dict[str, Any]) -> dict[str, Any]:
    if data.get("kind") == "group":
        reason = "a group is a hyperparameter search: run it with `kubelab sweep -f` or `kubelab run -f`"
        raise ValidationError("this polyaxonfile is a group", [FieldError("kind", reason)])
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
        for key in run:
            if key != "cmd":
                problems.append(FieldError(f"run.{key}", "unknown field; kubelab reads run.cmd"))
        spec["command"] = sanitize_cmd(run.get("cmd"))
    _build(data.get("build"), spec, problems)
    if data.get("outputs") is not None:
        problems.append(
            FieldError(
                "outputs",
                "outputs of other jobs and experiments are not mounted "
                "into runs here; copy what the run needs into its code",
            )
        )
    framework = data.get("framework")
    if framework is not None:
        name = str(framework).lower()
        if name in REFUSED_FRAMEWORKS:
            problems.append(FieldError("framework", REFUSED_FRAMEWORKS[name]))
        elif name not in FRAMEWORKS:
            reason = f"must be one of {', '.join(FRAMEWORKS)}, not {framework!r}"
            problems.append(FieldError("framework", reason))
        else:
            spec["framework"] = FRAMEWORKS[name]
    _backend(data.get("backend"), spec, problems)
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


def _backend(backend: Any, spec: dict[str, Any], problems: list[FieldError]) -> None:
    """`backend: kubeflow` (or `kubeflow/...`) -> engine kubeflow; `native` -> job; mpi refused."""
    if backend is None:
        return
    name = str(backend).lower().split("/", 1)[0]
    if name in BACKENDS:
        spec["engine"] = BACKENDS[name]
    elif name == "mpi":
        problems.append(FieldError("backend", REFUSED_FRAMEWORKS["mpi"]))
    else:
        problems.append(FieldError("backend", f"must be native or kubeflow, not {backend!r}"))


def _build(build: Any, spec: dict[str, Any], problems: list[FieldError]) -> None:
    """`build.image` runs as is (Kubernetes); `build_steps` with pip lines are the run's
    environment (a virtualenv here); what builds an image (a Dockerfile, a git ref) is refused."""
    if build is None:
        return
    if not isinstance(build, dict):
        problems.append(FieldError("build", "must be a mapping with image and build_steps"))
        return
    for key in build:
        if key == "image":
            spec["image"] = build["image"]
        elif key == "build_steps":
            environment, refused = environment_of(build[key], "build.build_steps")
            problems.extend(refused)
            if environment:
                spec["environment"] = environment
        elif key in (
            "dockerfile",
            "env_vars",
            "ref",
            "lang_env",
            "commit",
            "branch",
            "context",
            "nocache",
        ):
            problems.append(
                FieldError(
                    f"build.{key}",
                    "kubelab builds environments from pip build_steps, not images: "
                    "build the image yourself and give build.image",
                )
            )
        else:
            hint = did_you_mean(key, ("image", "build_steps"))
            problems.append(FieldError(f"build.{key}", "unknown field" + hint))


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
        spec["env"] = (
            dict(env["env_vars"]) if isinstance(env["env_vars"], dict) else {k: v for k, v in env["env_vars"]}
        )
    if env.get("max_restarts") is not None:
        spec["retries"] = env["max_restarts"]
    if env.get("affinity") is not None:
        problems.append(
            FieldError(
                "environment.affinity", "node affinity is not supported; use node_selector or a project group"
            )
        )
    sections = [(f"environment.{f}", env[f]) for f in ("pytorch", "tensorflow", "paddle") if f in env]
    if env.get("replicas") is not None:
        sections.append(("environment.replicas", env["replicas"]))
    for path, section in sections:
        if path != "environment.replicas":
            spec["framework"] = path.split(".")[1]
        _replicas(path, section, spec, problems)


def _replicas(path: str, section: Any, spec: dict[str, Any], problems: list[FieldError]) -> None:
    """`n_workers` workers beside the master; `n_ps` TensorFlow parameter servers."""
    if not isinstance(section, dict):
        problems.append(FieldError(path, "must be a mapping with n_workers (and n_ps)"))
        return
    for key in section:
        if key not in ("n_workers", "n_ps"):
            per_replica = key in ("default_worker", "default_ps", "worker", "ps")
            why = (
                "per-replica settings are not supported: every replica gets the master's resources"
                if per_replica
                else "unknown field"
            )
            problems.append(FieldError(f"{path}.{key}", why))
    workers, ps = section.get("n_workers", 0), section.get("n_ps", 0)
    for key, value in (("n_workers", workers), ("n_ps", ps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            reason = f"must be a whole number of 0 or more, not {value!r}"
            problems.append(FieldError(f"{path}.{key}", reason))
            return
    if workers:
        spec["replicas"] = workers + 1
    if ps:
        spec["parameter_servers"] = ps  # the spec refuses them for any framework but tensorflow
