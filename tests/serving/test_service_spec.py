"""The service spec: kubelab's `kind: service`, Polyaxon v1's service component, every bad field named."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubelab.errors import ValidationError
from kubelab.formats.detect import load_spec_file, service_mapping
from kubelab.formats.specfile import load_document
from kubelab.serving.spec import MODEL_HEALTH, ModelRef, Replicas, ServiceSpec
from kubelab.spec_schema import model_schema


def problems(data: object) -> dict[str, str]:
    with pytest.raises(ValidationError) as caught:
        ServiceSpec.parse(data)
    return {f.path: f.reason for f in caught.value.fields}


def test_a_run_s_model_is_an_inference_service_with_lineage() -> None:
    spec = ServiceSpec.parse({"kind": "service", "model": {"run": "a1b2", "path": "outputs/model.joblib"}})
    assert spec.model == ModelRef(path="outputs/model.joblib", run="a1b2")
    assert spec.name == "model" and spec.version == "1"
    assert (
        spec.serves_model
        and spec.readiness_path == MODEL_HEALTH.format(name="model") == "/v2/models/model/ready"
    )
    assert ServiceSpec.parse(spec.to_dict()) == spec


def test_an_internal_service_is_a_command_with_ports_and_replicas() -> None:
    spec = ServiceSpec.parse(
        {"command": "python -m http.server {{ port }}", "ports": [8080, "9090"], "replicas": 2, "version": 3}
    )
    assert spec.ports == [8080, 9090] and spec.replicas == Replicas(min=2, max=2) and spec.version == "3"
    assert not spec.serves_model and spec.readiness_path is None and spec.name == "python"


def test_every_bad_field_is_named_at_once() -> None:
    found = problems(
        {
            "name": "Iris Model",
            "version": "v.2",
            "model": {"path": "../x.joblib", "file": "y"},
            "predictor": "not a class",
            "ports": [0, 80, 80],
            "replicas": {"min": 3, "max": 2},
            "health_path": "ready",
            "gpus": 1,
            "kind": "experiment",
        }
    )
    assert set(found) == {
        "name",
        "version",
        "model.path",
        "model.file",
        "predictor",
        "ports[0]",
        "ports[2]",
        "replicas.max",
        "health_path",
        "gpus",
        "kind",
    }
    assert "resources.gpus" in found["gpus"] and "listed twice" in found["ports[2]"]


def test_a_service_needs_exactly_one_thing_to_run() -> None:
    assert "needs one of model" in problems({"name": "x"})["command"]
    both = problems({"command": ["redis-server"], "model": "model.joblib"})
    assert "either a command or a model" in both["command"]
    assert "at least 0" in problems({"command": "x", "replicas": {"min": -1}})["replicas.min"]
    assert "must be a number" in problems({"command": "x", "replicas": "two"})["replicas"]


def test_the_schema_is_the_dataclass_s() -> None:
    schema = model_schema(ServiceSpec)
    assert schema["additionalProperties"] is False
    assert {"model", "predictor", "command", "ports", "replicas", "health_path"} <= set(schema["properties"])
    assert schema["properties"]["name"]["pattern"].startswith("^[a-z]")


def test_kubelab_and_polyaxon_service_files_are_read(tmp_path: Path) -> None:
    own = tmp_path / "iris.yaml"
    own.write_text("kind: service\nversion: 2\nname: iris\nmodel: {run: r1, path: outputs/model.joblib}\n")
    spec = ServiceSpec.parse(service_mapping(load_document(own), own))
    assert spec.name == "iris" and spec.version == "2"
    polyaxon = tmp_path / "redis-ui.yaml"
    polyaxon.write_text(
        "version: 1.1\nkind: component\nname: redis-ui\nrun:\n  kind: service\n  ports: [8081]\n"
        "  replicas: 2\n  rewritePath: true\n  container:\n    image: rediscommander/redis-commander\n"
        "    command: [redis-commander]\n    env: [{name: REDIS_HOSTS, value: 'local:redis:6379'}]\n"
        "    resources: {limits: {cpu: 1, memory: 256Mi}}\n"
    )
    spec = ServiceSpec.parse(service_mapping(load_document(polyaxon), polyaxon))
    assert (spec.name, spec.image, spec.ports, spec.replicas.max) == (
        "redis-ui",
        "rediscommander/redis-commander",
        [8081],
        2,
    )
    assert spec.env == {"REDIS_HOSTS": "local:redis:6379"} and spec.resources.memory == "256Mi"
    for path in (own, polyaxon):  # `kubelab run -f` points to `kubelab serve -f`
        with pytest.raises(ValidationError, match="kubelab serve -f"):
            load_spec_file(path)


def test_polyaxon_service_fields_without_an_equivalent_are_refused(tmp_path: Path) -> None:
    data = {
        "version": 1.1,
        "kind": "component",
        "run": {
            "kind": "service",
            "isExternal": True,
            "rewritePath": False,
            "sidecars": [{"name": "x"}],
            "container": {"image": "nginx"},
        },
    }
    with pytest.raises(ValidationError) as caught:
        service_mapping(data)
    paths = {f.path for f in caught.value.fields}
    assert {"run.isExternal", "run.rewritePath", "run.sidecars", "run.container.command"} <= paths
    with pytest.raises(ValidationError, match="kind: service"):
        service_mapping({"command": "x"})


def test_values_no_process_can_take_are_refused_by_field() -> None:
    found = problems(
        {"command": ["run\x00"], "folder": "a\x00", "env": {"K": "v\x00"}, "health_path": "/ready\n"}
    )
    assert found["command"] == found["folder"] == found["env"] == "may not contain a NUL character"
    assert "absolute URL path" in found["health_path"]
    assert "NUL" in problems({"model": "model\x00.joblib"})["model.path"]
