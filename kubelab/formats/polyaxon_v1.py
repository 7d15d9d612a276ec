"""Polyaxon v1 files (`version: 1.1`, `kind: component | operation`) as kubelab specs.

A component's `run` (`kind: job`, or `pytorchjob`/`tfjob` with replicas) becomes an
experiment spec: the container's command and args, image, resources, env and working
directory; its `inputs` become typed inputs. An operation gives values to a component
(inline `component:` or `pathRef:`) through `params`; with a `matrix` it is a sweep.
Everything else is refused by name with the reason: references that need Polyaxon's
servers (`hubRef`, `urlRef`, `ref` params), `joins`, init containers, sidecars, volumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.formats.polyaxon_matrix import Matrix, search

COMPONENT = (
    "version",
    "kind",
    "name",
    "description",
    "tags",
    "inputs",
    "outputs",
    "run",
    "build",
    "termination",
    "queue",
    "plugins",
    "isApproved",
    "presets",
    "cache",
    "hooks",
    "template",
    "cost",
    "namespace",
)
OPERATION = (
    "version",
    "kind",
    "name",
    "description",
    "tags",
    "params",
    "matrix",
    "joins",
    "build",
    "component",
    "pathRef",
    "hubRef",
    "urlRef",
    "dagRef",
    "termination",
    "queue",
    "plugins",
    "runPatch",
    "patchStrategy",
    "schedule",
    "dependencies",
    "trigger",
    "conditions",
    "events",
    "hooks",
    "cache",
    "presets",
    "isPreset",
    "isApproved",
    "skipOnUpstreamSkip",
    "cost",
    "namespace",
)
# Operation and component fields kubelab has no equivalent for, with the reason.
UNSUPPORTED = {
    "joins": "joins read other runs' outputs from Polyaxon's API; not supported (left for later)",
    "hubRef": "components from Polyaxon Hub need Polyaxon's servers; write it inline or use pathRef",
    "urlRef": "kubelab does not fetch components over the network; download it and use pathRef",
    "dagRef": "dagRef names a component of a DAG; run the DAG with `kubelab pipeline run -f`",
    "runPatch": "patching a component's run is not supported; edit the component",
    "schedule": "a scheduled operation is added with `kubelab schedule add -f FILE`",
    "dependencies": "dependencies between operations belong to a DAG (`kubelab pipeline run -f`)",
    "trigger": "triggers belong to pipelines",
    "conditions": "conditions belong to pipelines",
    "events": "event-driven runs are not supported",
    "hooks": "hooks are not supported",
    "cache": "run caching is not supported",
    "presets": "Polyaxon presets are not supported; write the settings out",
    "isPreset": "Polyaxon presets are not supported",
    "template": "component templates are not supported",
    "namespace": "runs go to your own namespace here",
    "skipOnUpstreamSkip": "belongs to pipelines",
}
HARMLESS = ("version", "kind", "name", "description", "tags", "isApproved", "cost", "patchStrategy")
INPUT_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool"}
MATRIX_KINDS = ("grid", "random", "hyperband", "bayes", "hyperopt", "mapping")
MATRIX_NAMES = {
    "numRuns": "n_experiments",
    "numInitialRuns": "n_initial_trials",
    "utilityFunction": "utility_function",
    "acquisitionFunction": "acquisition_function",
    "gaussianProcess": "gaussian_process",
    "lengthScale": "length_scale",
    "numRestartsOptimizer": "n_restarts_optimizer",
}


def experiment(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A v1 component or operation (without matrix) -> an experiment spec mapping."""
    p = _Converter(base)
    spec = p.document(data)
    if data.get("kind") == "operation" and data.get("matrix") is not None:
        p.fail("matrix", "this operation is a sweep: run it with `kubelab sweep -f` or `kubelab run -f`")
    p.raise_errors()
    return spec


def sweep(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """A v1 operation with a matrix -> a sweep spec mapping."""
    p = _Converter(base)
    trial = p.document(data)
    matrix = data.get("matrix")
    params = trial.pop("params", {}) or {}
    result: dict[str, Any] = {"parameter_style": "env", "objective": {}}
    if data.get("name"):
        result["name"] = data["name"]
    if not isinstance(matrix, dict):
        p.refuse("matrix", "must be a mapping with kind and params")
    kind = matrix.get("kind")
    if kind == "iterative":
        p.fail("matrix.kind", "iterative matrices call a custom tuner; not supported")
    elif kind not in MATRIX_KINDS:
        p.fail("matrix.kind", f"must be one of {', '.join(MATRIX_KINDS)}, not {kind!r}")
    else:
        settings = {
            MATRIX_NAMES.get(str(k), str(k)): v
            for k, v in matrix.items()
            if k not in ("kind", "params", "concurrency", "earlyStopping")
        }
        if kind == "hyperband":
            settings["max_iter"] = settings.pop("maxIterations", None)
        elif kind == "bayes":
            settings["n_iterations"] = settings.pop("maxIterations", None)
            utility = settings.get("utility_function")
            if isinstance(utility, dict):
                settings["utility_function"] = _snake(utility)
        if kind != "mapping":
            result["space"] = p.m.space(matrix.get("params"), "matrix.params", v1=True)
        spelled = {v: k for k, v in MATRIX_NAMES.items()} | {
            "max_iter": "maxIterations",
            "n_iterations": "maxIterations",
        }
        search(p.m, kind, settings, "matrix", result, spelled)
        stop = p.m.stop_at(matrix.get("earlyStopping"), "matrix.earlyStopping", result["objective"])
        if stop is not None:
            result["stop_at"] = stop
    if not result["objective"].get("metric"):
        result["objective"] = {"metric": "loss", "direction": "minimize"}
    if matrix.get("concurrency") is not None:
        result["concurrency"] = matrix["concurrency"]
    searched = set(result.get("space") or {}) | {k for c in result.get("batch") or [] for k in c}
    fixed = {k: v for k, v in params.items() if k not in searched}
    fixed.update(result.pop("fixed", {}))
    if fixed:
        trial["params"] = fixed
    result["trial"] = trial
    p.raise_errors()
    return result


def _snake(mapping: dict[str, Any]) -> dict[str, Any]:
    return {MATRIX_NAMES.get(k, k): _snake(v) if isinstance(v, dict) else v for k, v in mapping.items()}


class _Converter:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.m = Matrix()

    @property
    def errors(self) -> list[FieldError]:
        return self.m.errors

    def fail(self, path: str, reason: str) -> None:
        self.m.fail(path, reason)

    def raise_errors(self) -> None:
        if self.errors:
            raise ValidationError("invalid Polyaxon v1 file", self.errors)

    def refuse(self, path: str, reason: str) -> NoReturn:
        """Fail at `path` and raise every problem so far: nothing after it can be read."""
        self.fail(path, reason)
        raise ValidationError("invalid Polyaxon v1 file", self.errors)

    def document(self, data: dict[str, Any]) -> dict[str, Any]:
        kind = data.get("kind")
        if kind == "component":
            return self.component(data, "")
        if kind != "operation":
            self.fail(
                "kind",
                f"Polyaxon v1 kind {kind!r} is not supported: kubelab reads component and "
                "operation"
                + (
                    " (a DAG is a component whose run is kind: dag; run it with `kubelab pipeline run -f`)"
                    if kind == "dag"
                    else ""
                ),
            )
            self.raise_errors()
        self.known("", data, OPERATION)
        component = self.operation_component(data)
        spec = self.component(component, "component.") if component is not None else {}
        for key in ("name", "description"):
            if data.get(key):
                spec[key] = data[key]
        if data.get("tags"):
            spec["tags"] = list(dict.fromkeys([*(spec.get("tags") or []), *data["tags"]]))
        self.common(data, spec, "")
        params = self.params(data.get("params"))
        if params:
            spec["params"] = params
        return spec

    def known(self, prefix: str, data: dict[str, Any], allowed: tuple[str, ...]) -> None:
        for key in data:
            if key in UNSUPPORTED and data[key] not in (None, [], {}):
                self.fail(f"{prefix}{key}", UNSUPPORTED[key])
            elif key not in allowed:
                self.fail(f"{prefix}{key}", "unknown field" + did_you_mean(str(key), allowed))

    def operation_component(self, data: dict[str, Any]) -> dict[str, Any] | None:
        if data.get("component") is not None:
            if not isinstance(data["component"], dict):
                self.fail("component", "must be a mapping (an inline component)")
                return None
            return data["component"]
        if data.get("pathRef"):
            from kubelab.formats.specfile import load_document

            path = (self.base / str(data["pathRef"])).resolve()
            if path != self.base.resolve() and self.base.resolve() not in path.parents:
                # the folder of the file being read bounds what it may pull in (REST too)
                self.fail(
                    "pathRef",
                    f"{data['pathRef']} is outside the operation's folder; give a relative path below it",
                )
                return None
            loaded = load_document(path, "pathRef")
            if not isinstance(loaded, dict) or loaded.get("kind") != "component":
                self.fail("pathRef", f"{data['pathRef']} must hold a Polyaxon component")
                return None
            return loaded
        if not any(data.get(k) for k in ("hubRef", "urlRef", "dagRef")):
            self.fail("component", "an operation needs a component (inline) or pathRef")
        return None

    def params(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail("params", "must be a mapping of names to {value: ...}")
            return {}
        result = {}
        for name, item in value.items():
            path = f"params.{name}"
            if not isinstance(item, dict) or "value" not in item:
                self.fail(path, "must be a mapping with value")
                continue
            for key in item:
                if key == "ref":
                    self.fail(f"{path}.ref", "values from other runs need Polyaxon's API; give the value")
                elif key in ("connection", "toInit", "contextOnly", "toEnv"):
                    self.fail(f"{path}.{key}", "is not supported; pass the value to the command")
                elif key != "value":
                    self.fail(f"{path}.{key}", "unknown field")
            result[str(name)] = item["value"]
        return result

    def component(self, data: dict[str, Any], prefix: str) -> dict[str, Any]:
        self.known(prefix, data, COMPONENT)
        spec: dict[str, Any] = {}
        for key in ("name", "description", "tags"):
            if data.get(key):
                spec[key] = data[key]
        inputs = self.inputs(data.get("inputs"), f"{prefix}inputs")
        if inputs:
            spec["inputs"] = inputs
        self.outputs(data.get("outputs"), f"{prefix}outputs")
        self.common(data, spec, prefix)
        from kubelab.formats.polyaxon_v1_run import convert_run

        convert_run(data.get("run"), f"{prefix}run", spec, self.fail)
        return spec

    def common(self, data: dict[str, Any], spec: dict[str, Any], prefix: str) -> None:
        """termination, queue and plugins: shared by components and operations."""
        termination = data.get("termination") or {}
        for key, value in termination.items() if isinstance(termination, dict) else ():
            if key == "maxRetries":
                spec["retries"] = value
            elif key == "timeout":
                spec["timeout"] = value
            else:
                self.fail(
                    f"{prefix}termination.{key}",
                    "is not supported (finished runs stay until `kubelab rm`)"
                    if key == "ttl"
                    else "unknown field",
                )
        if data.get("queue"):
            spec["queue"] = data["queue"]
        if data.get("build") is not None:
            self.build(data["build"], spec, f"{prefix}build")
        plugins = data.get("plugins") or {}
        for key, value in plugins.items() if isinstance(plugins, dict) else ():
            always = key in ("collectLogs", "collectArtifacts", "collectResources", "syncStatuses")
            if not (always and value is not False):
                self.fail(
                    f"{prefix}plugins.{key}",
                    "kubelab always records logs, metrics and outputs; other plugins have no equivalent"
                    if not always
                    else "kubelab always collects these; it cannot be turned off",
                )

    def build(self, build: Any, spec: dict[str, Any], path: str) -> None:
        """`build`: the image builder's operation; its `runPatch.init` dockerfile's pip lines
        are the run's environment here (hubRef, connection and params name the builder)."""
        from kubelab.formats.polyaxon_v1_run import dockerfile_environment

        if not isinstance(build, dict):
            self.fail(path, "must be a mapping with hubRef and runPatch")
            return
        for key in build:
            if key not in (
                "hubRef",
                "connection",
                "params",
                "runPatch",
                "patchStrategy",
                "queue",
                "presets",
                "cache",
                "nocache",
            ):
                self.fail(f"{path}.{key}", "unknown field")
        steps = (
            ((build.get("runPatch") or {}).get("init") or [])
            if isinstance(build.get("runPatch"), dict)
            else []
        )
        found = False
        for index, step in enumerate(steps if isinstance(steps, list) else []):
            if isinstance(step, dict) and step.get("dockerfile") is not None:
                found = True
                dockerfile_environment(
                    step["dockerfile"], f"{path}.runPatch.init[{index}].dockerfile", spec, self.fail
                )
        if not found:
            self.fail(f"{path}.runPatch", "needs an init dockerfile with pip run lines (the environment)")

    def inputs(self, value: Any, path: str) -> list[dict[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, "must be a list of inputs")
            return []
        result = []
        for index, item in enumerate(value):
            where = f"{path}[{index}]"
            if not isinstance(item, dict):
                self.fail(where, "must be a mapping with name and type")
                continue
            decl: dict[str, Any] = {"name": item.get("name")}
            kind = item.get("type", "str")
            if kind not in INPUT_TYPES:
                self.fail(
                    f"{where}.type",
                    f"input type {kind!r} is not supported; kubelab inputs are int, float, str or bool",
                )
                continue
            decl["type"] = INPUT_TYPES[kind]
            for key, target in (
                ("value", "default"),
                ("isOptional", "optional"),
                ("description", "description"),
                ("options", "choices"),
            ):
                if item.get(key) is not None:
                    decl[target] = item[key]
            for key in item:
                if key in ("isList", "isFlag", "argFormat", "connection", "toInit", "toEnv"):
                    self.fail(f"{where}.{key}", f"{key} is not supported; declare a plain input")
                elif key not in (
                    "name",
                    "type",
                    "value",
                    "isOptional",
                    "description",
                    "options",
                    "delayValidation",
                ):
                    self.fail(f"{where}.{key}", "unknown field")
            result.append(decl)
        return result

    def outputs(self, value: Any, path: str) -> None:
        """Outputs only declare what the run logs (through the tracking client); nothing to run."""
        for index, item in enumerate(value or []):
            if not isinstance(item, dict) or not item.get("name"):
                self.fail(f"{path}[{index}]", "must be a mapping with name")
                continue
            for key in item:
                if key not in ("name", "type", "description", "isOptional", "value", "delayValidation"):
                    self.fail(f"{path}[{index}].{key}", "unknown field")
