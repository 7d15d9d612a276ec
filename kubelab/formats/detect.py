"""Which format a spec file is written in, and the kubelab mapping it stands for.

One place tells the formats apart, so `kubelab run -f`, `kubelab sweep -f`, the REST API and
`%%train -f` agree: kubelab's own experiment and sweep specs, NNI experiment configs (v2
and v1), Polyaxon v0 files (`version: 1`, `kind: experiment | job | group`) and Polyaxon
v1 files (`version: 1.1`, `kind: component | operation`). A file that names a format
kubelab does not read is refused as such, never read as a kubelab spec with odd fields.
Services (kubelab's `kind: service`, a Polyaxon v1 component whose run is a service) are told
apart here too and read by `service_mapping`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError

POLYAXON_V0_KINDS = ("experiment", "job", "group")
POLYAXON_V1_KINDS = ("component", "operation")
# Formats people bring that are recognised and refused, with what to do instead.
REFUSED_KINDS = {
    "dag": "Polyaxon DAGs are pipelines: a component with run kind: dag runs with `kubelab pipeline run -f`",
    "pipeline": "Polyaxon pipelines are not supported yet (kubelab's pipelines will run them)",
    "notebook": "notebooks run in JupyterHub here: start one from the hub instead",
    "tensorboard": "start TensorBoard with `kubelab tensorboard start ID` or %tensorboard",
    "build": "kubelab does not build images: build it yourself and give the image",
    "preset": "Polyaxon presets have no kubelab equivalent",
}


def is_nni(data: Any) -> bool:
    from kubelab.formats.nni_v1 import is_nni_v1

    if not isinstance(data, dict):
        return False
    return any(str(k).lower().replace("_", "") == "trialcommand" for k in data) or is_nni_v1(data)


def polyaxon_version(data: Any) -> str | None:
    """ "v0", "v1", or None when `data` is not a polyaxonfile."""
    if not isinstance(data, dict) or "version" not in data or "kind" not in data:
        return None
    version = str(data["version"])
    if version in ("1", "1.0") and data["kind"] in POLYAXON_V0_KINDS:
        return "v0"
    if version.startswith("1.") and version != "1.0":
        return "v1"
    return None


def is_sweep(data: Any) -> bool:
    """True for documents that describe many trials: NNI configs, Polyaxon groups and matrices."""
    if is_nni(data):
        return True
    version = polyaxon_version(data)
    if version == "v0":
        return bool(data["kind"] == "group")
    if version == "v1":
        return data.get("kind") == "operation" and data.get("matrix") is not None
    return False


def is_service(data: Any) -> bool:
    """True for kubelab's `kind: service` spec and a Polyaxon v1 service component."""
    from kubelab.formats.polyaxon_v1_service import is_service_component

    if not isinstance(data, dict):
        return False
    if data.get("kind") == "service" and "apiVersion" not in data:
        return True
    return polyaxon_version(data) == "v1" and is_service_component(data)


def refuse_unknown(data: Any, path: str | Path | None = None) -> None:
    """ValidationError for a document in a format kubelab does not read (None otherwise)."""
    if not isinstance(data, dict) or "kind" not in data or not ({"version", "apiVersion"} & set(data)):
        return
    if data["kind"] == "service" and "apiVersion" not in data:
        return  # kubelab's own service spec (its `version` is the service's)
    kind = data["kind"]
    where = f"{path} is" if path else "this is"
    if "apiVersion" in data:
        api = str(data["apiVersion"])
        if api.startswith("kubeflow.org/") and kind == "Experiment":
            reason = "a Katib Experiment; kubelab does not read Katib files: see docs/migrating.md"
        else:
            reason = f"a Kubernetes object ({api} {kind}), not a kubelab spec"
        raise ValidationError(f"{where} in an unknown format", [FieldError("kind", reason)])
    if polyaxon_version(data) is not None:
        return
    if str(kind).lower() in REFUSED_KINDS:
        reason = f"Polyaxon kind {kind!r}: {REFUSED_KINDS[str(kind).lower()]}"
        raise ValidationError(f"{where} not an experiment", [FieldError("kind", reason)])
    reason = (
        f"unknown format: version {data['version']!r} with kind {kind!r} (kubelab reads Polyaxon "
        "v0 (version 1: experiment, job, group) and v1 (version 1.1: component, operation))"
    )
    raise ValidationError(f"{where} in an unknown format", [FieldError("kind", reason)])


def experiment_mapping(data: Any, base: Path, path: str | Path | None = None) -> dict[str, Any]:
    """The experiment spec mapping a file stands for (a sweep document is refused, pointing to it)."""
    refuse_unknown(data, path)
    where = f"{path} is" if path else "this is"
    if is_service(data):
        reason = "this is a service: start it with `kubelab serve -f`"
        raise ValidationError(f"{where} a service", [FieldError("kind", reason)])
    if is_sweep(data):
        what = "an NNI experiment config" if is_nni(data) else "a Polyaxon hyperparameter search"
        reason = "this is a sweep: run it with `kubelab sweep -f` or `kubelab run -f`"
        raise ValidationError(f"{where} {what}", [FieldError("file", reason)])
    version = polyaxon_version(data)
    if version == "v0":
        from kubelab.formats import polyaxon_v0 as polyaxon

        return polyaxon.convert(data)
    if version == "v1":
        from kubelab.formats import polyaxon_v1

        return polyaxon_v1.experiment(data, base)
    if not isinstance(data, dict):
        raise ValidationError(f"{where} not a spec", [FieldError("file", "must hold a mapping of fields")])
    return data


def sweep_mapping(data: Any, base: Path) -> Any:
    """The sweep spec mapping of a kubelab sweep spec, an NNI config or a Polyaxon search."""
    from kubelab.formats.nni_config import nni_to_sweep

    if isinstance(data, dict) and set(data) == {"nni"}:
        return nni_to_sweep(data["nni"], base_dir=base)
    if is_nni(data):
        return nni_to_sweep(data, base_dir=base)
    refuse_unknown(data)
    version = polyaxon_version(data)
    if version == "v1" and data["kind"] not in POLYAXON_V1_KINDS:
        from kubelab.formats import polyaxon_v1

        polyaxon_v1.experiment(data, base)  # refuses the kind (a dag points to pipelines)
    if version is not None and not is_sweep(data):
        raise ValidationError(
            "not a sweep",
            [
                FieldError(
                    "kind",
                    f"this Polyaxon {data['kind']} has no hyperparameter search (matrix); "
                    "run it with `kubelab run -f`",
                )
            ],
        )
    if version == "v0":
        from kubelab.formats import polyaxon_group

        return polyaxon_group.convert(data)
    if version == "v1":
        from kubelab.formats import polyaxon_v1

        return polyaxon_v1.sweep(data, base)
    return data


def service_mapping(data: Any, path: str | Path | None = None) -> dict[str, Any]:
    """The service spec mapping of kubelab's `kind: service` file or a Polyaxon v1 service."""
    where = f"{path} is" if path else "this is"
    if not is_service(data):
        refuse_unknown(data, path)
        reason = "a service file has kind: service (or is a Polyaxon v1 component whose run is kind: service)"
        raise ValidationError(f"{where} not a service", [FieldError("kind", reason)])
    if polyaxon_version(data) == "v1":
        from kubelab.formats.polyaxon_v1_service import service

        return service(data)
    mapping: dict[str, Any] = data
    return mapping


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """An experiment spec mapping from a kubelab spec file or a polyaxonfile (v0 or v1)."""
    from kubelab.formats.specfile import load_document

    data = load_document(path)
    return experiment_mapping(data, Path(path).resolve().parent, path)
