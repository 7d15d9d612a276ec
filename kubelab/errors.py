"""Errors that reach users: each names the field it is about and the reason.

Every entry point (REST, CLI, magics, sidebar) turns these into the same shape,
`{error, detail, fields}`, so a bad request reads the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """One problem with one field, addressed by a dotted path such as `resources.gpus`."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class KubelabError(Exception):
    """Base class for errors shown to users; `status` is the HTTP status to answer with."""

    status = 400
    error = "bad_request"

    def __init__(self, detail: str, fields: Iterable[FieldError] = ()):
        self.detail = detail
        self.fields = list(fields)
        super().__init__(self.message())

    def message(self) -> str:
        if not self.fields:
            return self.detail
        return self.detail + "\n" + "\n".join(f"  {f}" for f in self.fields)

    def to_json(self) -> dict[str, object]:
        return {
            "error": self.error,
            "detail": self.detail,
            "fields": [{"path": f.path, "reason": f.reason} for f in self.fields],
        }


class ValidationError(KubelabError):
    """A request that cannot be accepted as written; nothing was created."""

    error = "invalid"
    status = 422


class NotFound(KubelabError):
    status = 404
    error = "not_found"


class Conflict(KubelabError):
    status = 409
    error = "conflict"


class TooMany(KubelabError):
    """A per-user limit (open streams, TensorBoard sessions) is reached; the detail names it."""

    status = 429
    error = "too_many"


class BackendError(KubelabError):
    """The backend refused or failed; `detail` says what the backend said, in plain words."""

    status = 502
    error = "backend"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Suffix for an unknown name: `; did you mean 'gpus'?` or an empty string."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def type_name(value: Any) -> str:
    """How an error message names a value's type: "a mapping", "a list", "null", "int"..."""
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
