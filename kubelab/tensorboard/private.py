"""TensorBoard's process keeps its session's secrets from the machine's other accounts.

Every account may read every process's command line (`ps`, `/proc/PID/cmdline`) and connect to
any loopback port. So the supervisor hands the capability (TensorBoard's `--path_prefix`) and
the proxy's token to the child on a pipe, never as arguments; TensorBoard's own
`/tmp/.tensorboard-info` record (world-readable, and it holds the flags) is not written; its
serving message names the port, not the prefix; and, when a Jupyter server proxies it, every
request without the proxy's token header is a 403 before TensorBoard sees it.
"""

from __future__ import annotations

import hmac
import json
import sys
from collections.abc import Callable, Iterable
from typing import IO, Any

TOKEN_HEADER = "X-Kubelab-TensorBoard-Token"
_ENVIRON_KEY = "HTTP_" + TOKEN_HEADER.upper().replace("-", "_")

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def secrets_message(path_prefix: str, token: str | None) -> bytes:
    """What the supervisor writes to the child's stdin (one JSON line)."""
    return json.dumps({"path_prefix": path_prefix, "token": token}).encode() + b"\n"


def read_secrets(stream: IO[bytes]) -> tuple[str, str | None]:
    data = json.loads(stream.readline() or b"{}")
    prefix, token = data.get("path_prefix", ""), data.get("token")
    if not isinstance(prefix, str) or (token is not None and not isinstance(token, str)):
        raise SystemExit("kubelab: malformed TensorBoard secrets on stdin")
    return prefix, token


def guarded(app: WsgiApp, token: str) -> WsgiApp:
    """`app`, answering 403 to any request that does not carry the proxy's token."""
    expected = token.encode()

    def guard(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = str(environ.get(_ENVIRON_KEY, "")).encode()
        if not hmac.compare_digest(given, expected):
            body = b"only the Jupyter server's proxy may ask this TensorBoard\n"
            headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
            start_response("403 Forbidden", headers)
            return [body]
        return app(environ, start_response)

    return guard


def serve(flags: list[str], path_prefix: str, token: str | None) -> None:
    """Run TensorBoard with `flags` (no secrets among them) in this process."""
    from absl import app as absl_app
    from tensorboard import default, main_lib, program
    from tensorboard.plugins import base_plugin

    class Server(program.WerkzeugServer):  # type: ignore[misc]
        def __init__(self, wsgi_app: WsgiApp, flags: Any) -> None:
            super().__init__(guarded(wsgi_app, token) if token else wsgi_app, flags)

        def get_url(self) -> str:  # its serving message goes to a log: no capability in it
            return f"http://127.0.0.1:{self.server_port}/"

    class Private(program.TensorBoard):  # type: ignore[misc]
        def _register_info(self, server: Any) -> None:
            """TensorBoard records its flags in a world-readable /tmp/.tensorboard-info: not here."""

    main_lib.global_init()
    board = Private(plugins=default.get_plugins(), server_class=program.with_port_scanning(Server))
    sys.argv = ["tensorboard", *flags]  # Python's copy only: /proc/PID/cmdline is unchanged
    try:
        absl_app.run(board.main, flags_parser=lambda argv: board.configure(argv, path_prefix=path_prefix))
    except base_plugin.FlagsError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
