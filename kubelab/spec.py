"""The experiment spec: one validated model for `%%train`, the sidebar, `kubelab run` and files.

`ExperimentSpec.parse(data)` checks everything before anything is created and reports
every problem at once as `field.path: reason`. Unknown fields are refused with a
suggestion, because a typo silently ignored (`gpu: 2`) costs a researcher a day.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from kubelab import templating
from kubelab.code_snapshot import CodeSnapshot, default_name, read_code
from kubelab.elastic import REPLICAS_ALSO, Elastic, elastic_problems, read_elastic
from kubelab.environments.spec import Environment, EnvironmentReader, InitStep
from kubelab.errors import FieldError, ValidationError, did_you_mean, type_name
from kubelab.field_reader import about, bounds
from kubelab.gpu_share import is_fraction, parse_gpu_indices, parse_gpus
from kubelab.priorities import MAX_PRIORITY, NORMAL_PRIORITY, PRIORITY_NAMES, read_preemption
from kubelab.quantity import parse_quantity
from kubelab.spec_values import INPUT_TYPES, INVALID, convert_value

DISTRIBUTED = ("pytorch", "tensorflow", "paddle")  # replicas > 1 train together with one of these
# Single-process frameworks (Polyaxon's names): the run is a plain experiment, the framework recorded.
SINGLE_PROCESS = ("keras", "scikit-learn", "xgboost", "pytorch-ignite", "mxnet")
FRAMEWORKS = ("none", *DISTRIBUTED, *SINGLE_PROCESS)
ENGINES = ("job", "kubeflow")
Scalar = str | int | float | bool | None
MAX_COMMAND = 100_000  # characters in all arguments: within what the kernel accepts (ARG_MAX)
NUMBER = [{"type": "number"}]  # a quantity may be `4` or `0.5` as well as `500m`, `16Gi`
STRING = [{"type": "string"}]  # NNI's gpuIndices may be "0,2"


@dataclass
class Input:
    """A declared parameter: typed, with an optional default and a closed set of choices."""

    name: str = field(
        metadata=about("an identifier: the parameter's name", pattern="^[A-Za-z_][A-Za-z0-9_]*$")
    )
    type: str = field(default="str", metadata=about("how values are read", enum=list(INPUT_TYPES)))
    default: Scalar = field(default=None, metadata=about("the value when none is given"))
    optional: bool = field(default=False, metadata=about("true: the run starts without a value"))
    choices: list[Scalar] | None = field(default=None, metadata=about("the only values allowed"))
    description: str = field(default="", metadata=about("what the parameter means"))

    @property
    def required(self) -> bool:
        return not self.optional and self.default is None


@dataclass
class Resources:
    """What each replica asks for."""

    cpu: str | None = field(default=None, metadata=about("CPU per replica, e.g. 2 or 500m", NUMBER))
    memory: str | None = field(default=None, metadata=about("memory per replica, e.g. 8Gi", NUMBER))
    gpus: float = field(default=0, metadata=about("GPUs per replica; 1/n (0.5) shares one", minimum=0))
    gpu_type: str | None = field(default=None, metadata=about("a GPU type name such as A100"))
    gpu_indices: list[int] | None = field(default=None, metadata=about("only these GPUs (local)", STRING))
    shm: str | None = field(default=None, metadata=about("shared memory (/dev/shm), e.g. 1Gi", NUMBER))


@dataclass
class ExperimentSpec:
    """An experiment: what to run, with which parameters, where and on what."""

    name: str = field(default="", metadata=about("a display name (default: from the command)", maxLength=200))
    command: list[str] | str = field(
        default_factory=list,
        metadata=about(
            "the argv to run, or one string run by sh -c with {{ name }} filled in",
            [{"type": "array", "items": {"type": ["string", "number"]}}],
        ),
    )
    params: dict[str, Scalar] = field(default_factory=dict, metadata=about("parameter values"))
    inputs: list[Input] = field(default_factory=list, metadata=about("declared, typed parameters"))
    resources: Resources = field(default_factory=Resources, metadata=about("what each replica asks for"))
    replicas: int = field(
        default=1,
        metadata=about(
            "processes that train together; MIN:MAX for an elastic run",
            REPLICAS_ALSO,
            minimum=1,
            maximum=1024,
        ),
    )
    elastic: Elastic | None = field(
        default=None,
        metadata=about("train on between min and max replicas (pytorch, torchrun's c10d rendezvous)"),
    )
    framework: str = field(
        default="none", metadata=about("the framework (replicas > 1: a distributed one)", enum=[*FRAMEWORKS])
    )
    environment: Environment | None = field(
        default=None, metadata=about("a virtualenv to run in: requirements, packages, python (built once)")
    )
    init: list[InitStep] = field(
        default_factory=list, metadata=about("done in the run's code folder before the command: git, file...")
    )
    env: dict[str, str] = field(default_factory=dict, metadata=about("environment variables"))
    workdir: str | None = field(default=None, metadata=about("the working directory"))
    code: CodeSnapshot | None = field(
        default=None,
        metadata=about(
            "what to copy into the run's code/: a directory, or a script's source",
            [{"type": "string"}],
        ),
    )
    image: str | None = field(default=None, metadata=about("the container image (Kubernetes)"))
    node_selector: dict[str, str] = field(default_factory=dict, metadata=about("Kubernetes node labels"))
    tolerations: list[dict[str, Any]] = field(default_factory=list, metadata=about("Kubernetes tolerations"))
    retries: int = field(
        default=0, metadata=about("times a failed run is started again", minimum=0, maximum=100)
    )
    timeout: float | None = field(
        default=None,
        metadata=about(
            "stop the run after this long: seconds, or 30m, 2h",
            [{"type": "string"}],
        ),
    )
    tags: list[str] = field(
        default_factory=list,
        metadata=about(
            "labels to find the run by",
            [{"type": "string", "description": "comma-separated"}],
        ),
    )
    description: str = field(default="", metadata=about("what the run is for", maxLength=10_000))
    queue: str | None = field(default=None, metadata=about("the Kueue queue to wait in (Kubernetes)"))
    engine: str = field(default="job", metadata=about("how Kubernetes runs it", enum=list(ENGINES)))
    seed: int | None = field(
        default=None,
        metadata=about(
            "one number for the run's randomness: every replica gets it as KUBELAB_SEED and PYTHONHASHSEED",
            minimum=0,
            maximum=2**32 - 1,
        ),
    )
    parameter_servers: int = field(
        default=0, metadata=about("TensorFlow parameter servers", minimum=0, maximum=64)
    )
    priority: int = field(
        default=NORMAL_PRIORITY,
        metadata=about(
            "who waits and who is preempted: low (100), normal (1000), high (10000) or a number",
            [{"type": "string", "enum": list(PRIORITY_NAMES)}],
            minimum=0,
            maximum=MAX_PRIORITY,
        ),
    )
    preemptible: bool = field(
        default=False,
        metadata=about("may give its GPUs to a higher-priority run and resume later (default: true for low)"),
    )
    system_metrics_interval: int | None = field(
        default=None,
        metadata=about(
            "seconds between GPU, CPU and memory samples (default 5; 0: none)", minimum=0, maximum=3600
        ),
    )
    preemption_grace: float = field(
        default=30.0,
        metadata=about(
            "seconds between SIGTERM (save a checkpoint) and SIGKILL when preempted", [{"type": "string"}]
        ),
    )

    @classmethod
    def parse(cls, data: Any) -> ExperimentSpec:
        """Validate a plain mapping (from JSON, YAML or flags) into a spec, or raise ValidationError."""
        return _Parser().spec(data)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data; `parse(to_dict())` gives the spec back."""
        data = asdict(self)
        if self.code is None:
            data["code"] = None
        return data

    def resolved_params(self) -> dict[str, Scalar]:
        """Declared defaults overlaid with given params (already type-checked by parse)."""
        values: dict[str, Scalar] = {i.name: i.default for i in self.inputs if i.default is not None}
        values.update(self.params)
        return values

    def rendered_command(self) -> list[str]:
        """The argv to execute: a list runs as is; a string runs in `sh -c` with quoted values."""
        return templating.command_argv(self.command, self.resolved_params())

    @property
    def display_name(self) -> str:
        return self.name or default_name(self.command, self.code)


class _Parser(EnvironmentReader):
    """Collects every problem instead of stopping at the first one."""

    def known(self, path: str, data: dict[str, Any], allowed: tuple[str, ...]) -> None:
        for key in data:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                hint = did_you_mean(str(key), allowed)
                if not hint and not path:  # `gpus: 2` at the top belongs under resources
                    nested = did_you_mean(str(key), tuple(Resources.__dataclass_fields__))
                    hint = nested.replace("'", "'resources.", 1) if nested else ""
                self.fail(where, "unknown field" + hint)

    def spec(self, data: Any) -> ExperimentSpec:
        if not isinstance(data, dict):
            raise ValidationError(
                "invalid experiment spec", [FieldError("", "the spec must be a mapping of fields")]
            )
        fields = tuple(ExperimentSpec.__dataclass_fields__)
        self.known("", data, fields)
        spec = ExperimentSpec()
        spec.name = self.text(data, "name", "", limit=200)
        spec.description = self.text(data, "description", "", limit=10_000)
        spec.command = self.command(data.get("command"))
        spec.inputs = self.inputs(data.get("inputs"))
        spec.resources = self.resources(data.get("resources"))
        spec.elastic, elastic_size, problems = read_elastic(data)
        self.errors += problems
        spec.replicas = elastic_size or self.integer(
            data, "replicas", 1, **bounds(ExperimentSpec, "replicas")
        )
        spec.framework = self.choice(data, "framework", "none", FRAMEWORKS)
        spec.engine = self.choice(data, "engine", "job", ENGINES)
        spec.environment = self.environment(data.get("environment"))
        spec.init = self.init_steps(data.get("init"))
        spec.parameter_servers = self.integer(
            data, "parameter_servers", 0, **bounds(ExperimentSpec, "parameter_servers")
        )
        spec.env = self.string_map(data, "env")
        spec.workdir = self.text(data, "workdir", None) or None
        spec.code, problems = read_code(data.get("code"))
        self.errors += problems
        spec.image = self.text(data, "image", None) or None
        spec.node_selector = self.string_map(data, "node_selector")
        spec.tolerations = self.tolerations(data.get("tolerations"))
        spec.retries = self.integer(data, "retries", 0, **bounds(ExperimentSpec, "retries"))
        spec.timeout = self.duration(data, "timeout")
        spec.tags = self.tags(data.get("tags"))
        spec.queue = self.text(data, "queue", None) or None
        self.preemption(data, spec)
        if data.get("system_metrics_interval") is not None:
            spec.system_metrics_interval = self.integer(
                data, "system_metrics_interval", 0, **bounds(ExperimentSpec, "system_metrics_interval")
            )
        if data.get("seed") is not None:
            spec.seed = self.integer(data, "seed", 0, **bounds(ExperimentSpec, "seed"))
        spec.params = self.params(data.get("params"), spec.inputs)
        self.cross_checks(spec)
        if self.errors:
            raise ValidationError("invalid experiment spec", self.errors)
        return spec

    # -- structured fields ------------------------------------------------------------

    def preemption(self, data: dict[str, Any], spec: ExperimentSpec) -> None:
        spec.priority, spec.preemptible, problems = read_preemption(data)
        self.errors += problems
        spec.preemption_grace = self.duration(data, "preemption_grace") or spec.preemption_grace

    def command(self, value: Any) -> list[str] | str:
        if value is None or value == "" or value == []:
            return []
        parts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        size = sum(len(str(v)) for v in parts)
        if size > MAX_COMMAND:
            self.fail("command", f"must be at most {MAX_COMMAND} characters in all, not {size}")
            return []
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
            return [str(v) for v in value]
        self.fail("command", "must be a list of arguments or one command string")
        return []

    def inputs(self, value: Any) -> list[Input]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail("inputs", f"must be a list of declarations, not {type_name(value)}")
            return []
        result: list[Input] = []
        seen: set[str] = set()
        allowed = tuple(Input.__dataclass_fields__)
        for index, item in enumerate(value):
            path = f"inputs[{index}]"
            if not isinstance(item, dict):
                self.fail(path, "must be a mapping with at least a name")
                continue
            self.known(path, item, allowed)
            name = item.get("name")
            if not isinstance(name, str) or not name.isidentifier():
                self.fail(f"{path}.name", f"must be an identifier such as 'lr', not {name!r}")
                continue
            if name in seen:
                self.fail(f"{path}.name", f"'{name}' is declared twice")
                continue
            seen.add(name)
            kind = item.get("type", "str")
            if not isinstance(kind, str) or kind not in INPUT_TYPES:  # {} is not hashable
                self.fail(f"{path}.type", f"must be one of int, float, str, bool, not {kind!r}")
                continue
            decl = Input(name=name, type=kind, optional=bool(item.get("optional", False)))
            decl.description = self.text(item, "description", "", limit=10_000, path=f"{path}.description")
            if item.get("choices") is not None:
                choices = item["choices"]
                if not isinstance(choices, list) or not choices:
                    self.fail(f"{path}.choices", "must be a non-empty list")
                else:
                    decl.choices = [self.convert(f"{path}.choices", kind, c) for c in choices]
            if item.get("default") is not None:
                decl.default = self.convert(f"{path}.default", kind, item["default"], decl.choices)
            result.append(decl)
        return result

    def convert(self, path: str, kind: str, value: Any, choices: list[Any] | None = None) -> Scalar:
        """A value of the declared type; strings from flags (`-P lr=0.1`) are converted."""
        converted = convert_value(kind, value)
        if converted is INVALID:
            self.fail(path, f"must be of type {kind}, not {value!r}")
            return None
        if choices is not None and converted not in choices:
            self.fail(path, f"must be one of {', '.join(map(repr, choices))}, not {value!r}")
        scalar: Scalar = converted
        return scalar

    def params(self, value: Any, inputs: list[Input]) -> dict[str, Scalar]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.fail("params", f"must be a mapping of names to values, not {type_name(value)}")
            return {}
        declared = {i.name: i for i in inputs}
        result: dict[str, Scalar] = {}
        for name, item in value.items():
            path = f"params.{name}"
            if declared and name not in declared:
                self.fail(path, "is not a declared input" + did_you_mean(str(name), declared))
            elif name in declared:
                decl = declared[name]
                result[name] = self.convert(path, decl.type, item, decl.choices)
            elif isinstance(item, (dict, list)):
                self.fail(path, f"must be a string, number or boolean, not {type_name(item)}")
            else:
                result[name] = item
        for decl in inputs:
            if decl.required and decl.name not in result:
                self.fail(f"params.{decl.name}", "is a required input and has no value")
        return result

    def resources(self, value: Any) -> Resources:
        if value is None:
            return Resources()
        if not isinstance(value, dict):
            self.fail("resources", f"must be a mapping, not {type_name(value)}")
            return Resources()
        self.known("resources", value, tuple(Resources.__dataclass_fields__))
        res = Resources()
        for key in ("cpu", "memory", "shm"):
            item = value.get(key)
            if item is None:
                continue
            try:
                amount = parse_quantity(item)
            except ValueError as exc:
                self.fail(f"resources.{key}", str(exc))
                continue
            if amount == 0:
                self.fail(f"resources.{key}", "must be more than zero")
                continue
            setattr(res, key, str(item))
        readers: tuple[tuple[str, Callable[[Any], tuple[Any, str]]], ...] = (
            ("gpus", parse_gpus),
            ("gpu_indices", parse_gpu_indices),
        )
        for key, read in readers:
            if value.get(key) is not None:
                parsed, problem = read(value[key])
                if problem:
                    self.fail(f"resources.{key}", problem)
                else:
                    setattr(res, key, parsed)
        gpu_type = value.get("gpu_type")
        if gpu_type is not None and (not isinstance(gpu_type, str) or not gpu_type.strip()):
            self.fail("resources.gpu_type", "must be a GPU type name such as 'A100'")
        elif gpu_type:
            res.gpu_type = gpu_type.strip()
        return res

    def cross_checks(self, spec: ExperimentSpec) -> None:
        command_refused = any(e.path == "command" for e in self.errors)
        if not spec.command and not command_refused and not (spec.code and spec.code.source is not None):
            self.fail("command", "is required (or give code.source to run a script)")
        if isinstance(spec.command, str):
            for name in templating.undefined(spec.command, spec.resolved_params()):
                self.fail("command", f"undefined template variable '{name}'")
        if spec.parameter_servers and spec.framework != "tensorflow":
            self.fail("parameter_servers", "parameter servers exist only for framework tensorflow")
        self.errors += elastic_problems(spec.elastic, spec.framework)
        if spec.replicas > 1 and spec.framework not in DISTRIBUTED and not spec.elastic:
            named = f"{', '.join(DISTRIBUTED[:-1])} or {DISTRIBUTED[-1]}"
            self.fail("framework", f"replicas > 1 needs a framework: {named}")
        if is_fraction(spec.resources.gpus) and (spec.replicas > 1 or spec.parameter_servers):
            self.fail("resources.gpus", "a share of a GPU is for one-process runs; give replicas whole GPUs")
        if spec.resources.gpu_type and not spec.resources.gpus:
            self.fail("resources.gpu_type", "is set but resources.gpus is 0")
