"""The three PATCH flavours: JSON merge patch, strategic merge patch and JSON patch.

Strategic merge follows the `x-kubernetes-patch-strategy`/`-merge-key` annotations of the
official schemas (so `containers` merge by `name`), with the `$patch: delete|replace` and
`$retainKeys` directives; objects without a schema fall back to a plain merge patch.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpointer

from . import schemas
from .errors import ApiError, bad_request

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, `null` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Any, schema: dict[str, Any] | None) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch" or key.startswith("$setElementOrder/"):
            continue
        if key == "$retainKeys":
            result = {k: v for k, v in result.items() if k in value or k in patch}
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub = schemas.child(schema, key)
        resolved = schemas.resolve(sub) or {}
        if isinstance(value, list) and "merge" in resolved.get("x-kubernetes-patch-strategy",
                                                                ""):
            result[key] = _merge_list(result.get(key) or [], value,
                                      resolved.get("x-kubernetes-patch-merge-key"),
                                      resolved.get("items"))
        else:
            result[key] = strategic_merge(result.get(key), value, sub)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str | None,
                item_schema: dict[str, Any] | None) -> list[Any]:
    if merge_key is None:  # a list of primitives with strategy "merge": set union
        return list(current) + [v for v in patch if v not in current]
    result = list(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {merge_key}")
        positions = [i for i, old in enumerate(result)
                     if isinstance(old, dict) and old.get(merge_key) == item[merge_key]]
        if item.get("$patch") == "delete":
            result = [old for i, old in enumerate(result) if i not in positions]
        elif positions:
            result[positions[0]] = strategic_merge(result[positions[0]], item, item_schema)
        else:
            result.append(strategic_merge({}, item, item_schema))
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 operations (add/remove/replace/move/copy/test) on a copy of `target`."""
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type "
                          "[]handlers.jsonPatchOp")
    doc = copy.deepcopy(target)
    for op in operations:
        try:
            doc = _apply_op(doc, op)
        except (jsonpointer.JsonPointerException, KeyError, IndexError, TypeError) as exc:
            raise ApiError(422, f"the server rejected our request due to an error in our "
                                f"request: jsonpatch {op.get('op')} operation: {exc}",
                           "Invalid") from exc
    return doc


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    pointer = jsonpointer.JsonPointer(path)
    if not pointer.parts:
        raise KeyError("cannot address the document root")
    parent = jsonpointer.JsonPointer.from_parts(pointer.parts[:-1]).resolve(doc)
    return parent, pointer.parts[-1]


def _apply_op(doc: Any, op: dict[str, Any]) -> Any:
    kind = op.get("op")
    if kind == "test":
        if jsonpointer.resolve_pointer(doc, op["path"]) != op.get("value"):
            raise KeyError(f"testing value {op['path']} failed")
        return doc
    if kind in ("move", "copy"):
        value = copy.deepcopy(jsonpointer.resolve_pointer(doc, op["from"]))
        if kind == "move":
            doc = _apply_op(doc, {"op": "remove", "path": op["from"]})
        return _apply_op(doc, {"op": "add", "path": op["path"], "value": value})
    parent, last = _parent(doc, op["path"])
    if kind == "add":
        if isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), op["value"])
        else:
            parent[last] = op["value"]
    elif kind == "remove":
        del parent[int(last) if isinstance(parent, list) else last]
    elif kind == "replace":
        key = int(last) if isinstance(parent, list) else last
        if isinstance(parent, dict) and key not in parent:
            raise KeyError(f"replace operation does not apply: doc is missing key: {op['path']}")
        parent[key] = op["value"]
    else:
        raise KeyError(f"unknown op {kind!r}")
    return doc


def apply(content_type: str, target: dict[str, Any], patch: Any) -> dict[str, Any]:
    """Dispatch on the request's Content-Type (415 for the ones the server does not speak)."""
    base = content_type.split(";")[0].strip()
    if base == JSON_PATCH:
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        raise bad_request("patch body must be a JSON object")
    if base == MERGE:
        return merge_patch(target, patch)
    if base == STRATEGIC:
        schema = schemas.kind_schema(target.get("apiVersion", ""), target.get("kind", ""))
        if schema is None or (target.get("apiVersion"), target.get("kind")) in (
                schemas.CUSTOM_SCHEMAS):
            raise ApiError(415, "strategic merge patch is not supported for custom resources; "
                                "use a merge or JSON patch", "UnsupportedMediaType")
        return strategic_merge(target, patch, schema)
    raise ApiError(415, f"the body of the request was in an unknown format - accepted media "
                        f"types include: {JSON_PATCH}, {MERGE}, {STRATEGIC}",
                   "UnsupportedMediaType")
