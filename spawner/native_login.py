"""NativeAuthenticator's login on the JupyterHub kubelab installs.

NativeAuthenticator 1.3 (the latest) times each login with `self.statsd`, which JupyterHub 6
no longer gives its handlers: every login answered 500 ("'LoginHandler' object has no
attribute 'statsd'"). The shipped `native` choice (`hub_config/jupyterhub_config.py`) uses this
subclass, whose login handler has a timer that records nothing; everything else is
NativeAuthenticator's own.
"""

from __future__ import annotations

from typing import Any

from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import LoginHandler


class _Timer:
    def start(self) -> _Timer:
        return self

    def stop(self, send: bool = True) -> None:
        """Nothing is sent: the hub has no statsd client."""


class _NoStatsd:
    def timer(self, name: str) -> _Timer:
        return _Timer()

    def incr(self, name: str, count: int = 1) -> None:
        """Nothing is counted."""


class NativeLoginHandler(LoginHandler):  # type: ignore[misc]
    """NativeAuthenticator's login page and form, with the timer it expects."""

    @property
    def statsd(self) -> Any:
        return _NoStatsd()


class KubeLabNativeAuthenticator(NativeAuthenticator):  # type: ignore[misc]
    """NativeAuthenticator with a login that works on JupyterHub 6."""

    def get_handlers(self, app: Any) -> list[tuple[str, Any]]:
        return [
            (path, NativeLoginHandler if handler is LoginHandler else handler)
            for path, handler in super().get_handlers(app)
        ]
