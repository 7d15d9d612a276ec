"""The pipeline spec: named steps (experiments or sweeps), their order, and what passes between them.

`PipelineSpec.parse(data, base_dir)` validates like the experiment spec: every problem at
once, each as `steps.NAME.field: reason`, before anything is created. It refuses cycles,
unknown steps in `depends_on` or in templates, templates that reach a step that does not
run before (add it to `depends_on`), metrics a step does not declare in `outputs`, and
invalid schedules. Each step's own spec is checked with its pipeline templates filled by
placeholders (the service then checks paths as a submit would).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError, did_you_mean
from kubelab.pipelines.references import references, render
from kubelab.schedules.spec import Schedule, parse_schedule

EXPERIMENT, SWEEP = "experiment", "sweep"
ENGINES = ("driver", "argo")  # argo is answered by API discovery (kubelab.pipelines.engines)
STEP_FIELDS = ("name", "experiment", "sweep", "file", "depends_on", "retries", "cache", "outputs")
FIELDS = ("name", "description", "params", "steps", "cache", "engine", "schedule")
STEP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
PLACEHOLDER = "0"  # what a step reference reads as while its spec is checked


@dataclass
class Step:
    name: str
    kind: str  # experiment or sweep
    spec: dict[str, Any]  # the step's spec, pipeline templates still in it
    depends_on: list[str] = field(default_factory=list)
    retries: int = 0
    cache: bool = False
    outputs: list[str] = field(default_factory=list)  # metrics the step promises to report
    objective: str | None = None  # a sweep's objective metric

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            self.kind: copy.deepcopy(self.spec),
            "depends_on": list(self.depends_on),
            "retries": self.retries,
            "cache": self.cache,
            "outputs": list(self.outputs),
        }


@dataclass
class PipelineSpec:
    name: str = ""
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    engine: str = "driver"
    schedule: Schedule | None = None

    @classmethod
    def parse(
        cls, data: Any, base_dir: Path | None = None, params: dict[str, Any] | None = None
    ) -> PipelineSpec:
        """Validate a mapping; `params` (from `-P`) override the declared ones and must be declared."""
        return _Parser(Path(base_dir or Path.cwd())).spec(data, params or {})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; `parse(to_dict())` gives the spec back (file steps are inline by then)."""
        return {
            "name": self.name,
            "description": self.description,
            "params": dict(self.params),
            "steps": [s.to_dict() for s in self.steps],
            "engine": self.engine,
            "schedule": self.schedule.to_dict() if self.schedule else None,
        }

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def upstream(self, name: str) -> set[str]:
        """Every step that must finish before `name` (depends_on, transitively)."""
        seen: set[str] = set()
        todo = list(self.step(name).depends_on)
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(self.step(current).depends_on)
        return seen


class _Parser:
    def __init__(self, base: Path):
        self.base = base
        self.errors: list[FieldError] = []

    def fail(self, path: str, reason: str) -> None:
        self.errors.append(FieldError(path, reason))

    def spec(self, data: Any, overrides: dict[str, Any]) -> PipelineSpec:
        if not isinstance(data, dict):
            raise ValidationError("invalid pipeline spec", [FieldError("", "must be a mapping of fields")])
        for key in data:
            if key not in FIELDS:
                self.fail(str(key), "unknown field" + did_you_mean(str(key), FIELDS))
        spec = PipelineSpec()
        spec.name = self.text(data, "name")
        spec.description = self.text(data, "description")
        spec.params = self.params(data.get("params"), overrides)
        engine = data.get("engine") or "driver"
        if engine not in ENGINES:
            self.fail("engine", f"must be one of {', '.join(ENGINES)}, not {engine!r}")
        spec.engine = engine if engine in ENGINES else "driver"
        spec.schedule, problems = parse_schedule(data.get("schedule"))
        self.errors += problems
        cache = data.get("cache", False)
        if not isinstance(cache, bool):
            self.fail("cache", "must be true or false")
        spec.steps = self.steps(data.get("steps"), cache is True)
        if not any(e.path.startswith("steps") for e in self.errors):
            self.graph(spec)
        if not self.errors:
            for step in spec.steps:
                self.check_step_spec(spec, step)  # first: it learns each sweep's objective
            for step in spec.steps:
                self.references(spec, step)
        if self.errors:
            raise ValidationError("invalid pipeline spec", self.errors)
        return spec

    def text(self, data: dict[str, Any], key: str) -> str:
        value = data.get(key) or ""
        if not isinstance(value, str) or len(value) > 10_000:
            self.fail(key, "must be a string (at most 10000 characters)")
            return ""
        return value

    def params(self, value: Any, overrides: dict[str, Any]) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.fail("params", "must be a mapping of names to values")
            return {}
        result = {}
        for name, item in {**value, **overrides}.items():
            if name not in value:
                self.fail(f"params.{name}", "is not a pipeline param" + did_you_mean(str(name), value))
            elif not isinstance(name, str) or not STEP_NAME.match(name):
                self.fail(f"params.{name}", "names must be identifiers such as 'epochs'")
            elif isinstance(item, (dict, list)):
                self.fail(f"params.{name}", "must be a string, number or boolean")
            else:
                result[name] = item
        return result

    def steps(self, value: Any, cache_default: bool) -> list[Step]:
        if not isinstance(value, list) or not value:
            self.fail("steps", "must be a non-empty list of steps")
            return []
        steps, seen = [], set()
        for index, item in enumerate(value):
            where = f"steps[{index}]"
            if not isinstance(item, dict):
                self.fail(where, "must be a mapping with a name and one of experiment, sweep or file")
                continue
            name = item.get("name")
            if not isinstance(name, str) or not STEP_NAME.match(name):
                self.fail(f"{where}.name", f"must be an identifier such as 'train', not {name!r}")
                continue
            where = f"steps.{name}"
            if name in seen:
                self.fail(f"{where}.name", f"'{name}' names two steps")
                continue
            seen.add(name)
            for key in item:
                if key not in STEP_FIELDS:
                    self.fail(f"{where}.{key}", "unknown field" + did_you_mean(str(key), STEP_FIELDS))
            step = self.body(where, item)
            if step is None:
                continue
            step.name = name
            step.depends_on = self.names(f"{where}.depends_on", item.get("depends_on"))
            step.outputs = self.names(f"{where}.outputs", item.get("outputs"))
            retries = item.get("retries", 0)
            if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 20:
                self.fail(f"{where}.retries", f"must be a whole number from 0 to 20, not {retries!r}")
            else:
                step.retries = retries
            cache = item.get("cache", cache_default)
            if not isinstance(cache, bool):
                self.fail(f"{where}.cache", "must be true or false")
            step.cache = cache is True
            steps.append(step)
        return steps

    def body(self, where: str, item: dict[str, Any]) -> Step | None:
        given = [k for k in (EXPERIMENT, SWEEP, "file") if item.get(k) is not None]
        if len(given) != 1:
            self.fail(
                where,
                "give exactly one of experiment, sweep or file"
                + (f" (it has {', '.join(given)})" if given else ""),
            )
            return None
        kind = given[0]
        data = item[kind]
        if kind == "file":
            data, kind = self.load(f"{where}.file", data)
            if data is None:
                return None
        if not isinstance(data, dict):
            self.fail(f"{where}.{kind}", f"must be a {kind} spec (a mapping)")
            return None
        return Step(name="", kind=kind, spec=copy.deepcopy(data))

    def load(self, where: str, value: Any) -> tuple[Any, str]:
        """A step's spec from a file: a sweep (kubelab or NNI) or an experiment (kubelab or Polyaxon)."""
        from kubelab.formats import polyaxon_v0 as polyaxon
        from kubelab.sweeps.config_files import read_document

        if not isinstance(value, str) or not value:
            self.fail(where, "must be a path to a spec file")
            return None, ""
        path = (self.base / value).resolve()
        if path != self.base and self.base not in path.parents:
            self.fail(where, f"'{value}' is outside the pipeline's folder")
            return None, ""
        try:
            data, _ = read_document(path, where)
        except ValidationError as exc:
            self.errors += exc.fields
            return None, ""
        if isinstance(data, dict) and ("trial" in data or "trialCommand" in data or set(data) == {"nni"}):
            return data, SWEEP
        if polyaxon.is_polyaxon(data):
            try:
                return polyaxon.convert(data), EXPERIMENT
            except ValidationError as exc:
                self.errors += [FieldError(f"{where}.{f.path}", f.reason) for f in exc.fields]
                return None, ""
        return data, EXPERIMENT

    def names(self, where: str, value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(where, "must be a list of names")
            return []
        return list(dict.fromkeys(value))

    def graph(self, spec: PipelineSpec) -> None:
        """Unknown names in depends_on, and cycles (named by their steps)."""
        known = [s.name for s in spec.steps]
        for step in spec.steps:
            for name in step.depends_on:
                if name not in known:
                    hint = did_you_mean(name, known)
                    self.fail(f"steps.{step.name}.depends_on", f"no step named '{name}'" + hint)
                elif name == step.name:
                    self.fail(f"steps.{step.name}.depends_on", "a step cannot depend on itself")
        if self.errors:
            return
        state: dict[str, int] = {}  # 1 visiting, 2 done

        def visit(name: str, trail: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = trail[trail.index(name) :] + [name]
                self.fail(f"steps.{name}.depends_on", "makes a cycle: " + " -> ".join(cycle))
                raise _Cycle
            state[name] = 1
            for dep in spec.step(name).depends_on:
                visit(dep, [*trail, name])
            state[name] = 2

        try:
            for step in spec.steps:
                visit(step.name, [])
        except _Cycle:
            return

    def references(self, spec: PipelineSpec, step: Step) -> None:
        """Each `{{ steps... }}` or `{{ params... }}` names something that exists and runs earlier."""
        upstream = spec.upstream(step.name)
        for path, ref in references(step.spec, f"steps.{step.name}.{step.kind}"):
            problem = self.reference_problem(spec, step, upstream, ref)
            if problem:
                self.fail(path, f"'{{{{ {ref} }}}}': {problem}")

    def reference_problem(self, spec: PipelineSpec, step: Step, upstream: set[str], ref: str) -> str:
        parts = ref.split(".")
        if parts[0] == "params":
            if len(parts) != 2 or parts[1] not in spec.params:
                return "no pipeline param by that name" + did_you_mean(".".join(parts[1:]), spec.params)
            return ""
        names = [s.name for s in spec.steps]
        if len(parts) < 3:
            return "say what of the step: outputs, metrics.M, best.params.P or best.metrics.M"
        name, what = parts[1], parts[2:]
        if name not in names:
            return f"no step named '{name}'" + did_you_mean(name, names)
        if name not in upstream:
            return f"step '{name}' does not run before '{step.name}'; add it to depends_on"
        source = spec.step(name)
        if what == ["outputs"]:
            return ""
        if len(what) == 2 and what[0] == "metrics":
            if source.kind == SWEEP:
                return f"step '{name}' is a sweep: use best.metrics.{what[1]}"
            if what[1] not in source.outputs:
                return f"step '{name}' does not declare the metric '{what[1]}' in its outputs" + did_you_mean(
                    what[1], source.outputs
                )
            return ""
        if len(what) == 3 and what[0] == "best" and what[1] in ("params", "metrics"):
            if source.kind != SWEEP:
                return f"step '{name}' is an experiment: only a sweep has a best trial"
            if what[1] == "params":
                known = sweep_param_names(source.spec)
                if known is not None and what[2] not in known:
                    return f"the sweep '{name}' has no parameter '{what[2]}'" + did_you_mean(what[2], known)
                return ""
            declared = [*source.outputs, *([source.objective] if source.objective else [])]
            if what[2] not in declared:
                return (
                    f"step '{name}' does not declare the metric '{what[2]}' (its objective "
                    "and outputs are declared)" + did_you_mean(what[2], declared)
                )
            return ""
        return "unknown reference; use outputs, metrics.M, best.params.P or best.metrics.M"

    def check_step_spec(self, spec: PipelineSpec, step: Step) -> None:
        data = render(step.spec, placeholders(spec, step.spec))
        where = f"steps.{step.name}.{step.kind}"
        try:
            if step.kind == EXPERIMENT:
                from kubelab.spec import ExperimentSpec

                ExperimentSpec.parse(data)
            else:
                from kubelab.sweeps.service import Sweeps
                from kubelab.sweeps.sweep_spec import SweepSpec

                parsed = SweepSpec.parse(Sweeps.spec_mapping(data, self.base), base_dir=self.base)
                step.objective = parsed.objective.metric
        except ValidationError as exc:
            self.errors += [
                FieldError(f"{where}.{f.path}" if f.path else where, f.reason) for f in exc.fields
            ]


class _Cycle(Exception):
    pass


def sweep_param_names(data: dict[str, Any]) -> list[str] | None:
    """The flat parameter names of a sweep spec's inline space (None when it is in a file)."""
    from kubelab.sweeps.space import SearchSpace

    space = data.get("space")
    if not isinstance(space, dict):
        return None
    try:
        return SearchSpace.parse(space).flat_names()
    except ValidationError:
        return None


def placeholders(spec: PipelineSpec, data: Any) -> dict[str, Any]:
    """Values for checking a step's spec before any step ran: params are real, step results not."""
    values: dict[str, Any] = {}
    for _, ref in references(data):
        values[ref] = spec.params.get(ref[7:], PLACEHOLDER) if ref.startswith("params.") else PLACEHOLDER
    return values
