"""Reading spec files: kubelab YAML/JSON, or a polyaxonfile, with clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError


def load_document(path: str | Path, field: str = "file") -> Any:
    """Parse a YAML or JSON file (JSON is YAML) into data."""
    import yaml

    from kubelab import safe_yaml

    source = Path(path)
    try:
        text = source.read_text()
    except FileNotFoundError:
        raise ValidationError(f"cannot read {path}", [FieldError(field, f"no such file: {path}")]) from None
    except (IsADirectoryError, PermissionError) as exc:
        raise ValidationError(f"cannot read {path}", [FieldError(field, str(exc))]) from None
    try:
        return safe_yaml.load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)  # RefusedYaml: its own sentence
        raise ValidationError(f"{path} is not valid YAML", [FieldError(field, f"{where}{problem}")]) from None


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """An experiment spec mapping from a kubelab spec file or a polyaxonfile."""
    from kubelab import polyaxon

    data = load_document(path)
    if polyaxon.is_polyaxon(data):
        return polyaxon.convert(data)
    if isinstance(data, dict) and "trialCommand" in data:
        raise ValidationError(f"{path} is an NNI experiment config", [FieldError(
            "file", "this is a sweep: run it with `kubelab sweep -f`")])
    if not isinstance(data, dict):
        raise ValidationError(f"{path} is not a spec", [FieldError("file", "must hold a mapping of fields")])
    return data
