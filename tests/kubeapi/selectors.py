"""Label and field selectors with the API server's syntax and error messages."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

_LABEL_OPS = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(==|=|!=|\s+in\s+|\s+notin\s+)\s*(.*?))?\s*$")

Requirement = Callable[[dict[str, str]], bool]


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( ... )` value sets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in (p.strip() for p in parts) if p]


def _requirement(key: str, op: str, values: set[str] | None) -> Requirement:
    if op == "exists":
        return lambda labels: key in labels
    if op == "!":
        return lambda labels: key not in labels
    if op == "!=" or op == "notin":
        return lambda labels: labels.get(key) not in (values or set())
    return lambda labels: labels.get(key) in (values or set())


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse `a=b,c!=d,e in (x,y),!f,g` into predicates over a labels dict."""
    if not text:
        return []
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        m = _LABEL_OPS.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: found '{part}', expected: "
                              "identifier")
        negate, key, op, value = m.group(1), m.group(2), (m.group(3) or "").strip(), m.group(4)
        if negate and op:
            raise bad_request(f"unable to parse requirement: '!' cannot be used with '{op}'")
        if not op:
            requirements.append(_requirement(key, "!" if negate else "exists", None))
        elif op in ("in", "notin"):
            if not (value.startswith("(") and value.endswith(")")):
                raise bad_request(f"unable to parse requirement: found '{value}', expected: '('")
            values = {v.strip() for v in value[1:-1].split(",") if v.strip()}
            requirements.append(_requirement(key, op, values))
        else:
            requirements.append(_requirement(key, op, {value}))
    return requirements


def labels_match(requirements: list[Requirement], obj: dict[str, Any]) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(req(labels) for req in requirements)


# Field selectors: the fields each kind supports, as dotted paths into the object.
_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
SUPPORTED_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "Secret": ("type",),
    "Namespace": ("status.phase",),
    "Job": ("status.successful",),
    "Node": ("spec.unschedulable",),
}


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source":
        return (obj.get("source") or {}).get("component", "")
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text: str | None, kind: str) -> list[Callable[[dict], bool]]:
    """Parse `metadata.name=x,status.phase!=Running`; unknown fields are a 400 like the API."""
    if not text:
        return []
    allowed = _COMMON_FIELDS + SUPPORTED_FIELDS.get(kind, ())
    predicates: list[Callable[[dict], bool]] = []
    for part in _split_top_level(text):
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        path, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if path not in allowed:
            raise bad_request(f'"{path}" is not a known field selector: only "'
                              + '", "'.join(allowed) + '"')
        if op == "!=":
            predicates.append((lambda p, v: lambda o: _field_value(o, p) != v)(path, value))
        else:
            predicates.append((lambda p, v: lambda o: _field_value(o, p) == v)(path, value))
    return predicates


def fields_match(predicates: list[Callable[[dict], bool]], obj: dict[str, Any]) -> bool:
    return all(p(obj) for p in predicates)
