"""A Polyaxon v1 `run` section (`kind: job | pytorchjob | tfjob`) as experiment spec fields.

A job is one container. A Kubeflow-style job has replica groups; kubelab runs every
replica with one command, image and resources, so groups must agree on them: PyTorch's
master and workers become `replicas`, TensorFlow's chief and workers `replicas` and its
ps `parameter_servers`. Anything that would change what runs without a kubelab
equivalent (init containers, sidecars, volumes, connections, evaluators) is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RUN_KINDS_REFUSED = {
    "dag": "a DAG is a pipeline: run it with `kubelab pipeline run -f` (kubelab run reads jobs)",
    "mpijob": "MPI jobs need an MPI launcher, which kubelab does not provide; use pytorchjob",
    "service": "a service is not an experiment: start it with `kubelab serve -f`",
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
        if key in ("init", "sidecars", "connections", "volumes") and section[key]:
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
    command = container.get("command") or []
    args = container.get("args") or []
    command = [command] if isinstance(command, str) else command
    args = [args] if isinstance(args, str) else args
    if not isinstance(command, list) or not isinstance(args, list) or not (command or args):
        fail(f"{where}.command", "must be a list of words (with args), as a Kubernetes container's")
    else:
        spec["command"] = [str(w) for w in command + args]
    if container.get("image"):
        spec["image"] = container["image"]
    workdir = container.get("workingDir")
    if workdir == SCALAR_GLOBALS_UPLOADS:
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
