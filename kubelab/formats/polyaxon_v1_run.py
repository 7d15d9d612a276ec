"""A Polyaxon v1 `run` section (`kind: job | pytorchjob | tfjob`) as experiment spec fields.

A job is one container. A Kubeflow-style job has replica groups; kubelab runs every
replica with one command, image and resources, so groups must agree on them: PyTorch's
master and workers become `replicas`, TensorFlow's chief and workers `replicas` and its
ps `parameter_servers`. Anything that would change what runs without a kubelab
equivalent (init containers, sidecars, volumes, connections, evaluators) is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubelab.formats.build_steps import environment_of

RUN_KINDS_REFUSED = {
    "dag": "a DAG is a pipeline: run it with `kubelab pipeline run -f` (kubelab run reads jobs)",
    "mpijob": "MPI jobs need an MPI launcher, which kubelab does not provide; use pytorchjob",
    "service": "services (long-running servers) are not experiments; run them in JupyterHub",
    "notebook": "notebooks run in JupyterHub here",
    "tensorboard": "start TensorBoard with `kubelab tensorboard start ID`",
    "daskjob": "Dask jobs are not supported",
    "rayjob": "Ray jobs are not supported",
    "xgbjob": "XGBoost jobs are not supported",
    "mxjob": "MXNet jobs are not supported",
    "paddlejob": "write it as a kubelab spec with framework paddle",
    "cleaner": "not an experiment",
    "notifier": "not an experiment",
    "tuner": "not an experiment",
    "watchdaemon": "not an experiment",
}
SCALAR_GLOBALS_UPLOADS = "{{ globals.run_artifacts_path }}/uploads"
# where Polyaxon's init steps put what they fetch; here the run's code folder, the command's cwd
ARTIFACTS_PATH = re.compile(r"\{\{\s*globals\.artifacts_path\s*\}\}/?")
INIT = ("git", "artifacts", "file", "paths", "dockerfile", "path", "container", "connection")
DOCKERFILE = ("image", "run", "env", "langEnv", "filename", "workdir", "path", "uid", "gid", "shell")


Fail = Callable[[str, str], None]
JOB = ("kind", "container", "environment", "init", "sidecars", "connections", "volumes")
REPLICA = ("replicas", "container", "environment", "init", "sidecars", "connections", "volumes")
CONTAINER = ("name", "image", "command", "args", "env", "resources", "workingDir", "imagePullPolicy")
ENVIRONMENT = ("nodeSelector", "tolerations", "labels", "annotations")
GROUPS = {"pytorchjob": ("master", "worker"), "tfjob": ("chief", "worker", "ps", "evaluator")}
RUN_FIELDS = {
    "pytorchjob": ("cleanPodPolicy", "schedulingPolicy"),
    "tfjob": ("cleanPodPolicy", "schedulingPolicy"),
}


def convert_run(run: Any, path: str, spec: dict[str, Any], fail: Fail) -> None:
    if not isinstance(run, dict):
        fail(path, "is required: a mapping with kind job (or pytorchjob, tfjob) and a container")
        return
    kind = run.get("kind")
    if kind == "job":
        _known(run, JOB, path, fail)
        _replica(run, path, spec, fail)
    elif kind in GROUPS:
        _distributed(kind, run, path, spec, fail)
    elif kind in RUN_KINDS_REFUSED:
        fail(f"{path}.kind", f"{kind}: {RUN_KINDS_REFUSED[kind]}")
    else:
        fail(f"{path}.kind", f"must be job, pytorchjob or tfjob, not {kind!r}")


def _known(section: dict[str, Any], allowed: tuple[str, ...], path: str, fail: Fail) -> None:
    for key in section:
        if key in ("sidecars", "connections", "volumes") and section[key]:
            fail(f"{path}.{key}", f"{key} are not supported: put what the run needs in its code or image")
        elif key not in allowed:
            fail(f"{path}.{key}", "unknown field")


def _replica(section: dict[str, Any], path: str, spec: dict[str, Any], fail: Fail) -> None:
    """One container (and its environment) -> command, image, resources, env, workdir."""
    container = section.get("container")
    if not isinstance(container, dict):
        fail(f"{path}.container", "is required: a mapping with image and command")
        return
    where = f"{path}.container"
    _known(container, CONTAINER, where, fail)
    init = section.get("init") or []
    if init:
        convert_init(init, f"{path}.init", spec, fail)
    command = container.get("command") or []
    args = container.get("args") or []
    command = [command] if isinstance(command, str) else command
    args = [args] if isinstance(args, str) else args
    if not isinstance(command, list) or not isinstance(args, list) or not (command or args):
        fail(f"{where}.command", "must be a list of words (with args), as a Kubernetes container's")
    else:
        words = [str(w) for w in command + args]
        spec["command"] = [ARTIFACTS_PATH.sub("", w) for w in words] if init else words
    if container.get("image"):
        spec["image"] = container["image"]
    workdir = container.get("workingDir")
    if init and isinstance(workdir, str) and ARTIFACTS_PATH.match(workdir):
        spec["workdir"] = ARTIFACTS_PATH.sub("", workdir) or "."  # relative: in the run's code folder
    elif workdir == SCALAR_GLOBALS_UPLOADS:
        spec["code"] = {"path": "."}  # what `polyaxon run -u` uploads: the file's folder, snapshotted
    elif isinstance(workdir, str) and "{{" in workdir:
        fail(f"{where}.workingDir", f"only {SCALAR_GLOBALS_UPLOADS} (the uploaded code) has an equivalent")
    elif workdir:
        spec["workdir"] = workdir
    env = container.get("env") or []
    values = {}
    for index, item in enumerate(env if isinstance(env, list) else []):
        if not isinstance(item, dict) or "value" not in item:
            fail(f"{where}.env[{index}]", "must be {name, value} (valueFrom is not supported)")
        else:
            values[str(item.get("name"))] = item["value"]
    if values:
        spec["env"] = values
    _resources(container.get("resources"), f"{where}.resources", spec, fail)
    environment = section.get("environment") or {}
    for key, value in environment.items() if isinstance(environment, dict) else ():
        if key == "nodeSelector":
            spec["node_selector"] = value
        elif key == "tolerations":
            spec["tolerations"] = value
        elif key in ("labels", "annotations"):
            fail(f"{path}.environment.{key}", "kubelab sets its own labels; custom ones are not supported")
        else:
            fail(f"{path}.environment.{key}", "is not supported (kubelab reads nodeSelector and tolerations)")


def _resources(value: Any, path: str, spec: dict[str, Any], fail: Fail) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        fail(path, "must be a mapping with limits and/or requests")
        return
    out: dict[str, Any] = {}
    for section in ("requests", "limits"):  # limits win, as they bound what the run gets
        for key, amount in (value.get(section) or {}).items():
            target = {"cpu": "cpu", "memory": "memory", "nvidia.com/gpu": "gpus"}.get(key)
            if target is None:
                fail(f"{path}.{section}.{key}", "kubelab schedules cpu, memory and nvidia.com/gpu")
            else:
                out[target] = amount
    for key in value:
        if key not in ("requests", "limits"):
            fail(f"{path}.{key}", "unknown field")
    if out:
        spec["resources"] = out


def _distributed(kind: str, run: dict[str, Any], path: str, spec: dict[str, Any], fail: Fail) -> None:
    groups = GROUPS[kind]
    for key in run:
        if key not in ("kind", *groups, *RUN_FIELDS[kind]):
            fail(f"{path}.{key}", "unknown field")
    if run.get("schedulingPolicy"):
        fail(f"{path}.schedulingPolicy", "gang scheduling settings are not supported (use a Kueue queue)")
    if run.get("evaluator"):
        fail(f"{path}.evaluator", "TensorFlow evaluators are not supported: every replica trains")
    present = [g for g in groups if isinstance(run.get(g), dict) and g not in ("ps", "evaluator")]
    if not present:
        fail(path, f"needs at least one of {', '.join(g for g in groups if g not in ('ps', 'evaluator'))}")
        return
    first = present[0]
    total, reference = 0, None
    for group in present:
        where = f"{path}.{group}"
        section = run[group]
        _known(section, REPLICA, where, fail)
        count = section.get("replicas", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            fail(f"{where}.replicas", f"must be a whole number of 0 or more, not {count!r}")
            continue
        total += count
        converted: dict[str, Any] = {}
        _replica(section, where, converted, fail)
        if reference is None:
            reference = converted
        elif converted and converted != reference:
            fail(
                where,
                f"must run the same container as {first} (command, image, resources): "
                "kubelab runs every replica alike, telling them apart by RANK / TF_CONFIG",
            )
    spec.update(reference or {})
    spec["framework"] = "pytorch" if kind == "pytorchjob" else "tensorflow"
    spec["replicas"] = max(total, 1)
    ps = run.get("ps")
    if isinstance(ps, dict):
        spec["parameter_servers"] = ps.get("replicas", 1)


def convert_init(steps: Any, path: str, spec: dict[str, Any], fail: Fail) -> None:
    """`init`: git, file, artifacts (another run's, by `run`), paths -> kubelab's init steps;
    a `dockerfile`'s pip lines -> the run's environment. Init containers and connections are
    Polyaxon's own and refused."""
    if not isinstance(steps, list):
        fail(path, "must be a list of init steps")
        return
    converted: list[dict[str, Any]] = []
    for index, step in enumerate(steps):
        where = f"{path}[{index}]"
        if not isinstance(step, dict):
            fail(where, "must be a mapping with git, file, artifacts, paths or dockerfile")
            continue
        for key in step:
            if key not in INIT:
                fail(f"{where}.{key}", "unknown field")
        if step.get("container"):
            fail(f"{where}.container", "custom init containers are not supported: use git, file or paths")
        if step.get("connection"):
            fail(
                f"{where}.connection",
                "Polyaxon connections are not used here: give git.url (credentials stay in your "
                "workspace's git credential store) or artifacts.run",
            )
        if step.get("dockerfile") is not None:
            dockerfile_environment(step["dockerfile"], f"{where}.dockerfile", spec, fail)
            continue
        item = {k: step[k] for k in ("git", "artifacts", "file", "paths") if step.get(k) is not None}
        if isinstance(item.get("git"), dict):
            item["git"] = {k: v for k, v in item["git"].items() if k != "connection"}
        if isinstance(item.get("file"), dict):
            item["file"] = {k: v for k, v in item["file"].items() if k != "kind"}
        if isinstance(item.get("artifacts"), dict) and not item["artifacts"].get("run"):
            fail(f"{where}.artifacts", "name the run whose outputs to copy: artifacts.run (its id)")
            continue
        if isinstance(step.get("path"), str):
            item["path"] = ARTIFACTS_PATH.sub("", step["path"]) or None
        if item:
            converted.append(item)
    if converted:
        spec["init"] = converted


def dockerfile_environment(dockerfile: Any, path: str, spec: dict[str, Any], fail: Fail) -> None:
    """A `dockerfile` init step's `run` lines (pip install ...) -> the environment; its image."""
    if not isinstance(dockerfile, dict):
        fail(path, "must be a mapping with image and run")
        return
    for key in dockerfile:
        if key not in DOCKERFILE:
            fail(f"{path}.{key}", "unknown field")
    if dockerfile.get("image"):
        spec["image"] = dockerfile["image"]
    environment, refused = environment_of(dockerfile.get("run") or [], f"{path}.run")
    for problem in refused:
        fail(problem.path, problem.reason)
    if environment:
        spec["environment"] = environment
