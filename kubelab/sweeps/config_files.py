"""Reading JSON or YAML documents (search spaces, NNI configs) from files or inline text.

Both parsers normally keep the last of two equal keys without a word; a search space
that says `lr` twice is a mistake, so duplicates are refused with the line they are on.
PyYAML is imported only when a document is YAML.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError

_SUFFIXES = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


class _DuplicateKey(ValueError):
    pass


def read_document(source: str | os.PathLike[str], field: str) -> tuple[Any, Path | None]:
    """The parsed document and the file it came from (None for inline text).

    `source` is a path to a `.json`, `.yaml` or `.yml` file, or the document itself.
    Problems are reported on `field` (e.g. `space_file`).
    """
    path = _as_path(source)
    if path is None:
        text = str(source)
        kind = "json" if text.lstrip().startswith(("{", "[")) else "yaml"
        return parse_text(text, kind, field), None
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValidationError("cannot read document", [FieldError(field, f"no such file: {path}")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(
            "cannot read document", [FieldError(field, f"cannot read {path}: {exc}")]
        ) from None
    kind = _SUFFIXES.get(path.suffix.lower()) or ("json" if text.lstrip().startswith("{") else "yaml")
    return parse_text(text, kind, f"{field} ({path.name})"), path


def _as_path(source: str | os.PathLike[str]) -> Path | None:
    if isinstance(source, os.PathLike):
        return Path(source)
    text = str(source)
    if "\n" in text or text.lstrip().startswith(("{", "[")):
        return None
    if os.path.exists(text) or Path(text).suffix.lower() in _SUFFIXES:
        return Path(text).expanduser()
    return None


def parse_text(text: str, kind: str, field: str) -> Any:
    """Parse JSON or YAML text, refusing duplicate keys; errors name `field` and the line."""
    if kind == "json":
        try:
            return json.loads(text, object_pairs_hook=_unique_pairs)
        except _DuplicateKey as exc:
            raise ValidationError("invalid document", [FieldError(field, str(exc))]) from None
        except json.JSONDecodeError as exc:
            reason = f"not valid JSON: line {exc.lineno} column {exc.colno}: {exc.msg}"
            raise ValidationError("invalid document", [FieldError(field, reason)]) from None
        except (ValueError, RecursionError) as exc:  # 5,000-digit integers, 100,000 nested brackets
            raise ValidationError("invalid document", [FieldError(field, f"not valid JSON: {exc}")]) from None
    import yaml  # lazily: only YAML documents need it

    from kubelab import safe_yaml

    try:
        return safe_yaml.load(text, _unique_key_loader(yaml))
    except yaml.YAMLError as exc:
        reason = f"not valid YAML: {exc}".replace("\n", " ")
        raise ValidationError("invalid document", [FieldError(field, reason)]) from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(f"duplicate key '{key}' (each name may appear once)")
        result[key] = value
    return result


_LOADER: Any = None


def _unique_key_loader(yaml: Any) -> Any:
    global _LOADER
    if _LOADER is None:
        from kubelab.safe_yaml import NoAliasLoader

        class UniqueKeyLoader(NoAliasLoader):
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=deep)
                    if not isinstance(key, (str, int, float, bool)) and key is not None:
                        continue  # unhashable keys are refused later, as non-string names
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None,
                            None,
                            f"duplicate key '{key}' (each name may appear once)",
                            key_node.start_mark,
                        )
                    seen.add(key)
                return super().construct_mapping(node, deep=deep)

        _without_sexagesimal(yaml, UniqueKeyLoader)
        _LOADER = UniqueKeyLoader
    return _LOADER


def yaml_loader() -> Any:
    """The YAML loader documents are read with (duplicate keys refused, no base-60 numbers)."""
    import yaml

    return _unique_key_loader(yaml)


def _without_sexagesimal(yaml: Any, loader: Any) -> None:
    """YAML 1.1 reads `1:10:5` as the base-60 number 4205 and `0:1` as 1; YAML 1.2 dropped that.

    Polyaxon writes ranges that way (`linspace: 1:10:5`), so they stay text, as YAML 1.2 reads them.
    """
    import re

    loader.yaml_implicit_resolvers = {
        first: [
            (tag, regexp)
            for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
        ]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:int",
        re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
        list("-+0123456789"),
    )
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+0123456789."),
    )
