"""Retrying the API server when it is busy, not wrong: 429 and 5xx, and conflicts where asked.

In a spawn storm the API server sheds load with 429 (`Retry-After` says when to come back) and
can answer 5xx while etcd catches up. Every spawn retrying on the same schedule would come back
together, so each waits a random part of an exponentially growing delay ("full jitter"), and
never less than the server asked for. After the last try the caller gets the server's own
answer, which `cause` turns into a sentence naming it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubernetes_asyncio.client.rest import ApiException

T = TypeVar("T")
BUSY = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 6
BASE_DELAY = 0.2
MAX_DELAY = 10.0


def retry_after(exc: ApiException) -> float | None:
    """The server's `Retry-After` in seconds (the delta form the API server sends), or None."""
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def delay(attempt: int, exc: ApiException | None = None) -> float:
    """Seconds before try `attempt + 1`: full jitter, at least the server's `Retry-After`."""
    jittered = random.uniform(0, min(MAX_DELAY, BASE_DELAY * 2**attempt))
    asked = retry_after(exc) if exc is not None else None
    return jittered if asked is None else min(MAX_DELAY, asked) + jittered


def retryable(exc: BaseException, conflicts: bool = False) -> bool:
    if isinstance(exc, asyncio.TimeoutError):
        return True
    return isinstance(exc, ApiException) and (exc.status in BUSY or (conflicts and exc.status == 409))


async def retrying(
    call: Callable[[], Awaitable[T]], *, conflicts: bool = False, attempts: int = ATTEMPTS
) -> T:
    """`call()`, tried again after a busy answer (and a 409 with `conflicts`), `attempts` times."""
    for attempt in range(attempts):
        try:
            return await call()
        except (ApiException, asyncio.TimeoutError) as exc:
            if attempt == attempts - 1 or not retryable(exc, conflicts):
                raise
            await asyncio.sleep(delay(attempt, exc if isinstance(exc, ApiException) else None))
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def cause(exc: ApiException, message: str, attempts: int = ATTEMPTS) -> str:
    """A sentence for the spawn page naming why the API server's answer ended the spawn."""
    if exc.status == 429:
        return (
            f"the Kubernetes API server is overloaded (429 Too Many Requests) and still refused "
            f"after {attempts} tries: {message}; try again in a minute"
        )
    if exc.status in BUSY:
        return (
            f"the Kubernetes API server failed ({exc.status} {exc.reason}) {attempts} times in a "
            f"row: {message}; try again in a minute, and tell your admin if it persists"
        )
    return f"the cluster refused this server: {message}"
