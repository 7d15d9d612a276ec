"""Fault injection: make the next N matching requests fail, to test clients' error paths."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .errors import ApiError


@dataclass
class Fault:
    verb: str
    resource: str
    code: int
    remaining: int
    message: str
    namespace: str | None

    def matches(self, verb: str, resource: str, namespace: str) -> bool:
        return (self.verb in ("*", verb) and self.resource in ("*", resource)
                and self.namespace in (None, namespace))


class FaultInjector:
    """Rules consumed in order; each matching request uses up one of a rule's `times`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, verb: str, resource: str, code: int = 500, times: int = 1,
            message: str | None = None, namespace: str | None = None) -> None:
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._faults.append(Fault(verb, resource, code, times,
                                      message or f"injected failure ({code})", namespace))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, verb: str, resource: str, namespace: str) -> ApiError | None:
        """The error to answer with, if a rule matches `verb` on `resource` (e.g. `pods/log`)."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(verb, resource, namespace):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    headers = {"Retry-After": "1"} if fault.code in (429, 503) else {}
                    return ApiError(fault.code, fault.message, headers=headers)
        return None
