"""API errors and the `Status` bodies a real API server answers with.

Clients (and kubelab) parse `reason`, `code` and `details`, so the shapes here mirror
k8s.io/apimachinery's `StatusError` constructors field for field.
"""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Gone",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An API failure that becomes a `Status` body with the given HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str | None, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": kind}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return details


def qualified(plural: str, group: str) -> str:
    """`pods`, `jobs.batch` - how the API server names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{qualified(plural, group)} "{name}" not found', "NotFound",
        _details(name, group, plural),
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409, f'{qualified(plural, group)} "{name}" already exists', "AlreadyExists",
        _details(name, group, plural),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        "Conflict",
        _details(name, group, plural),
    )


def forbidden(plural: str, group: str, name: str | None, why: str) -> ApiError:
    target = qualified(plural, group) + (f' "{name}"' if name else "")
    return ApiError(403, f"{target} is forbidden: {why}", "Forbidden",
                    _details(name, group, plural))


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 with one cause per field, message joined like apimachinery's ToAggregate."""
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    details = _details(name, group, kind)
    details["causes"] = causes
    return ApiError(422, f'{kind}{"." + group if group else ""} "{name}" is invalid: {joined}',
                    "Invalid", details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, "BadRequest")


def expired(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def cause(field: str, reason: str, message: str) -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}
