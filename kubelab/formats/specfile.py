"""Reading a YAML or JSON document from a file, with errors that name the field and the line
(what the document is, kubelab spec or another project's file, is `formats`' business)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError


def load_document(path: str | Path, field: str = "file") -> Any:
    """Parse a YAML or JSON file (JSON is YAML) into data."""
    import yaml

    from kubelab import safe_yaml
    from kubelab.sweeps.config_files import yaml_loader

    source = Path(path)
    try:
        text = source.read_text()
    except FileNotFoundError:
        raise ValidationError(f"cannot read {path}", [FieldError(field, f"no such file: {path}")]) from None
    except (IsADirectoryError, PermissionError) as exc:
        raise ValidationError(f"cannot read {path}", [FieldError(field, str(exc))]) from None
    try:
        return safe_yaml.load(text, yaml_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)  # RefusedYaml: its own sentence
        raise ValidationError(f"{path} is not valid YAML", [FieldError(field, f"{where}{problem}")]) from None
