"""Kubernetes API failures as kubelab errors, and transparent retries of transient ones.

Overload and outages (429, 5xx, a refused or reset connection) are retried with exponential
backoff, honouring `Retry-After`; what a retry cannot fix (RBAC, quota, invalid objects,
conflicts) becomes an error that says what Kubernetes said, in the request's terms.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from kubelab.errors import BackendError, Conflict, FieldError, KubelabError, NotFound, ValidationError

RETRYABLE = frozenset({429, 500, 502, 503, 504})
ROLE_FILE = "hub_config/rbac/notebook-role.yaml"
T = TypeVar("T")


class Forbidden(BackendError):
    """RBAC said no: the notebook's service account lacks a permission."""

    status = 403
    error = "forbidden"


class QuotaExceeded(BackendError):
    """A ResourceQuota of the namespace refused the request; nothing was created."""

    status = 403
    error = "quota_exceeded"


class Unavailable(BackendError):
    """The API server could not be reached or kept failing."""

    status = 503
    error = "unavailable"


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds before retry `attempt` (1-based): Retry-After if given, else backoff."""
        if retry_after and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_delay)
        backoff: float = self.base_delay * 2 ** (attempt - 1)
        return min(self.max_delay, backoff * (0.5 + random.random() / 2))


DEFAULT_RETRY = RetryPolicy()


def status_body(exc: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def api_message(exc: ApiException) -> str:
    return status_body(exc).get("message") or exc.reason or f"HTTP {exc.status}"


def call(
    fn: Callable[..., T], *args: Any, policy: RetryPolicy | None = None, host: str = "", **kwargs: Any
) -> T:
    """`fn(*args, **kwargs)`, retrying transient failures; other ApiExceptions propagate.

    An unreachable API server becomes `Unavailable` once the retries are spent.
    """
    policy = policy or DEFAULT_RETRY
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status not in RETRYABLE or attempt >= policy.attempts:
                raise
            headers = exc.headers or {}
            time.sleep(policy.delay(attempt, headers.get("Retry-After")))
        except (urllib3.exceptions.HTTPError, ConnectionError) as exc:
            if attempt >= policy.attempts:
                raise unreachable(exc, host) from exc
            time.sleep(policy.delay(attempt))


def unreachable(exc: BaseException, host: str) -> Unavailable:
    cause = exc
    while isinstance(reason := getattr(cause, "reason", None), BaseException):
        cause = reason
    text = str(cause)
    if "refused" in text.lower():
        text = "connection refused"
    where = f" at {host}" if host else ""
    return Unavailable(f"cannot reach the Kubernetes API{where}: {text}")


def translate(exc: ApiException, action: str) -> KubelabError:
    """The kubelab error for a failed `action` (e.g. "create Job train-x"), in plain words."""
    message = api_message(exc)
    body = status_body(exc)
    code = exc.status
    if code == 403 and ("exceeded quota" in message or "failed quota" in message):
        start = message.find("exceeded quota")
        if start < 0:
            start = message.find("failed quota")
        detail = message[start:]
        return QuotaExceeded(f"cannot {action}: {detail}", [FieldError("resources", detail)])
    if code == 403:
        return Forbidden(
            f"cannot {action}: {message}. The notebook's service account needs the Role in {ROLE_FILE}"
        )
    if code == 401:
        return Forbidden(
            f"cannot {action}: the Kubernetes API refused the notebook's credentials (401 Unauthorized)"
        )
    if code == 404:
        return NotFound(f"cannot {action}: {message}")
    if code == 409:
        return Conflict(f"cannot {action}: {message}")
    if code in (400, 422):
        causes = (body.get("details") or {}).get("causes") or []
        fields = [
            FieldError(
                f"kubernetes.{c.get('field') or ''}".rstrip("."),
                c.get("message") or c.get("reason") or "invalid",
            )
            for c in causes
            if isinstance(c, dict)
        ]
        return ValidationError(f"Kubernetes refused to {action}: {message}", fields)
    if code in RETRYABLE:
        return Unavailable(
            f"cannot {action}: the Kubernetes API kept failing ({code} {exc.reason}): {message}"
        )
    return BackendError(f"cannot {action}: {code} {exc.reason}: {message}")
