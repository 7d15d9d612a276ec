"""The service spec: a long-running server (a run's model, a predictor class, or any command).

`ServiceSpec.parse(data)` reads a `kind: service` mapping (a kubelab spec file, `kubelab serve`'s
flags, `POST /kubelab/api/services`) and reports every problem at once as `field.path: reason`,
as `ExperimentSpec` does. One spec serves both halves: locally a supervised process per replica,
on Kubernetes an InferenceService or a Deployment; each field's meaning lives in its `about(...)`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kubelab.errors import FieldError, ValidationError, type_name
from kubelab.field_reader import about, bounds
from kubelab.spec import Resources
from kubelab.spec import _Parser as _SpecReader

KIND = "service"
MAX_REPLICAS = 100
NAME = "^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$"  # a DNS label, short enough for `<name>-v<version>-...`
VERSION = "^[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?$"
PREDICTOR = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$"
# The Open Inference Protocol's model readiness (the server's own, /v2/health/ready, answers
# before its models have loaded)
MODEL_HEALTH = "/v2/models/{name}/ready"


@dataclass
class Replicas:
    """How many copies answer: `min` always run, up to `max` when autoscaled (Kubernetes)."""

    min: int = field(default=1, metadata=about("replicas always running", minimum=0, maximum=MAX_REPLICAS))
    max: int = field(
        default=1, metadata=about("replicas at most (autoscaling)", minimum=1, maximum=MAX_REPLICAS)
    )


@dataclass
class ModelRef:
    """The file a service serves: a path inside a run's directory, or inside `folder`."""

    path: str = field(metadata=about("the model file, e.g. outputs/model.joblib", maxLength=4096))
    run: str | None = field(
        default=None, metadata=about("the run whose directory holds the file", maxLength=200)
    )


@dataclass
class ServiceSpec:
    """A service: what answers, how many copies, on which ports, and what it serves (lineage)."""

    name: str = field(
        default="",
        metadata=about("the service's name, a DNS label (default: from the model or command)", pattern=NAME),
    )
    version: str = field(
        default="1",
        metadata=about(
            "the version this spec rolls out beside others of the name",
            [{"type": "integer"}],
            pattern=VERSION,
        ),
    )
    description: str = field(default="", metadata=about("what the service is for", maxLength=10_000))
    model: ModelRef | None = field(
        default=None,
        metadata=about("the model to serve with the Open Inference Protocol (v2 REST)", [{"type": "string"}]),
    )
    predictor: str | None = field(
        default=None,
        metadata=about(
            "a Python class `module:Class` with load() and predict(), imported from folder", pattern=PREDICTOR
        ),
    )
    command: list[str] | str = field(
        default_factory=list,
        metadata=about(
            "an internal service: the argv to run, or one string run by sh -c; {{ port }} is its port",
            [{"type": "array", "items": {"type": ["string", "number"]}}],
        ),
    )
    image: str | None = field(
        default=None, metadata=about("the container image (Kubernetes)", maxLength=1024)
    )
    folder: str | None = field(
        default=None,
        metadata=about(
            "where it runs and imports from (default: the run's directory, else the current one)",
            maxLength=4096,
        ),
    )
    env: dict[str, str] = field(default_factory=dict, metadata=about("environment variables"))
    ports: list[int] = field(
        default_factory=list,
        metadata=about(
            "its ports, the first one proxied (default: one chosen free, given as {{ port }} and PORT)",
            maxItems=16,
        ),
    )
    resources: Resources = field(default_factory=Resources, metadata=about("what each replica asks for"))
    replicas: Replicas = field(
        default_factory=Replicas,
        metadata=about("replicas {min, max}; a number n means {min: n, max: n}", [{"type": "integer"}]),
    )
    health_path: str | None = field(
        default=None,
        metadata=about(
            f"the path answering 200 when ready (default {MODEL_HEALTH} for a model, else the port open)",
            maxLength=2048,
        ),
    )

    @classmethod
    def parse(cls, data: Any) -> ServiceSpec:
        """Validate a plain mapping (from JSON, YAML or flags) into a spec, or raise ValidationError."""
        return _Reader().read(data)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data (with `kind: service`); `parse(to_dict())` gives it back."""
        return {"kind": KIND, **asdict(self)}

    @property
    def serves_model(self) -> bool:
        """True for an inference service (a model file or a predictor), False for a plain command."""
        return self.model is not None or self.predictor is not None

    @property
    def readiness_path(self) -> str | None:
        """The path polled for readiness; None means the first port accepting a connection."""
        return self.health_path or (MODEL_HEALTH.format(name=self.name) if self.serves_model else None)


def default_name(spec: ServiceSpec) -> str:
    """A DNS label from the model file's, the predictor's or the command's name."""
    if spec.model is not None:
        stem = spec.model.path.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
    elif spec.predictor:
        stem = spec.predictor.rsplit(":", 1)[-1]
    else:
        words = spec.command.split() if isinstance(spec.command, str) else spec.command
        stem = words[0].rsplit("/", 1)[-1] if words else "service"
    label = re.sub(r"[^a-z0-9-]+", "-", stem.lower()).strip("-")[:39].strip("-")
    return label if label and label[0].isalpha() else f"svc-{label}".strip("-")[:40]


class _Reader(_SpecReader):
    """The experiment spec's reader (unknown fields, resources, command) with a service's fields."""

    def read(self, data: Any) -> ServiceSpec:
        if not isinstance(data, dict):
            raise ValidationError(
                "invalid service spec", [FieldError("", "the spec must be a mapping of fields")]
            )
        data = dict(data)
        kind = data.pop("kind", KIND)
        if kind != KIND:
            self.fail("kind", f"must be {KIND!r} for a service, not {kind!r}")
        self.known("", data, tuple(ServiceSpec.__dataclass_fields__))
        if isinstance(data.get("version"), int) and not isinstance(data["version"], bool):
            data["version"] = str(data["version"])
        spec = ServiceSpec()
        spec.version = self.pattern(data, "version", VERSION, "a short lowercase label such as 2") or "1"
        spec.description = self.text(data, "description", "", limit=10_000)
        spec.model = self.model(data.get("model"))
        spec.predictor = self.pattern(data, "predictor", PREDICTOR, "a `module:Class` such as serve:Model")
        spec.command = self.command(data.get("command"))
        spec.image = self.text(data, "image", None, limit=1024) or None
        spec.folder = self.text(data, "folder", None) or None
        spec.env = self.string_map(data, "env")
        spec.ports = self.ports(data.get("ports"))
        spec.resources = self.resources(data.get("resources"))
        spec.replicas = self.replicas(data.get("replicas"))
        spec.health_path = self.health(data.get("health_path"))
        self.service_checks(spec)
        spec.name = self.pattern(data, "name", NAME, "a lowercase DNS label such as iris") or default_name(
            spec
        )
        if self.errors:
            raise ValidationError("invalid service spec", self.errors)
        return spec

    def pattern(self, data: dict[str, Any], key: str, regex: str, what: str) -> str | None:
        value = self.text(data, key, None, limit=4096)
        if value is not None and not re.match(regex, value):
            self.fail(key, f"must be {what}, not {value!r}")
            return None
        return value if isinstance(value, str) else None

    def model(self, value: Any) -> ModelRef | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = {"path": value}
        if not isinstance(value, dict):
            self.fail("model", f"must be a file path or a mapping with path and run, not {type_name(value)}")
            return None
        self.known("model", value, tuple(ModelRef.__dataclass_fields__))
        path = self.text(value, "path", None, limit=4096, path="model.path")
        run = self.text(value, "run", None, limit=200, path="model.run")
        if not path:
            self.fail("model.path", "is required: the model file, e.g. outputs/model.joblib")
            return None
        if path.startswith("/") and run:
            self.fail("model.path", "must be relative to the run's directory when model.run is given")
        elif ".." in path.split("/"):
            self.fail("model.path", "may not leave its folder with '..'")
        return ModelRef(path=path, run=run or None)

    def ports(self, value: Any) -> list[int]:
        if value is None:
            return []
        items = value if isinstance(value, list) else [value]
        if len(items) > 16:
            self.fail("ports", f"may list at most 16 ports, not {len(items)}")
            return []
        result: list[int] = []
        for index, item in enumerate(items):
            number = int(item) if isinstance(item, (int, str)) and str(item).isdigit() else 0
            if isinstance(item, bool) or not 1 <= number <= 65535:
                self.fail(f"ports[{index}]", f"must be a port number from 1 to 65535, not {item!r}")
            elif number in result:
                self.fail(f"ports[{index}]", f"port {number} is listed twice")
            else:
                result.append(number)
        return result

    def replicas(self, value: Any) -> Replicas:
        if value is None:
            return Replicas()
        if isinstance(value, int) and not isinstance(value, bool):
            value = {"min": value, "max": max(value, 1)}
        if not isinstance(value, dict):
            self.fail("replicas", f"must be a number or a mapping with min and max, not {type_name(value)}")
            return Replicas()
        self.known("replicas", value, tuple(Replicas.__dataclass_fields__))
        before = len(self.errors)
        numbers = {f"replicas.{key}": item for key, item in value.items() if key in ("min", "max")}
        low = self.integer(numbers, "replicas.min", 1, **bounds(Replicas, "min"))
        high = self.integer(numbers, "replicas.max", max(low, 1), **bounds(Replicas, "max"))
        if len(self.errors) > before:
            return Replicas()
        if low > high:
            self.fail("replicas.max", f"must be at least replicas.min ({low}), not {high}")
        return Replicas(min=low, max=high)

    def health(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.startswith("/") or len(value) > 2048 or not _url(value):
            self.fail("health_path", f"must be an absolute URL path such as /healthz, not {value!r}")
            return None
        return value

    def service_checks(self, spec: ServiceSpec) -> None:
        kinds = {"model": spec.model, "predictor": spec.predictor, "command": spec.command}
        given = [key for key, value in kinds.items() if value]
        refused = {e.path.split(".")[0].split("[")[0] for e in self.errors}
        if not given and not refused & set(kinds):
            self.fail(
                "command",
                "a service needs one of model (a file to serve), predictor (module:Class) or command",
            )
        elif "command" in given and len(given) > 1:
            self.fail(
                "command", "is for internal services: give either a command or a model/predictor, not both"
            )
        if spec.resources.gpu_type and not spec.resources.gpus:
            self.fail("resources.gpu_type", "is set but resources.gpus is 0")
        words = [spec.command] if isinstance(spec.command, str) else spec.command
        texts = {"command": words, "env": [*spec.env, *spec.env.values()], "folder": [spec.folder or ""]}
        texts.update({"model.path": [spec.model.path if spec.model else ""], "image": [spec.image or ""]})
        for field_path, values in texts.items():
            if any("\x00" in value for value in values):  # no file name, argument or variable holds one
                self.fail(field_path, "may not contain a NUL character")


def _url(value: str) -> bool:
    """A URL path's characters: printable, no space."""
    return value.isprintable() and " " not in value
