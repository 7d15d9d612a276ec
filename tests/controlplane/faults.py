"""A thin fault-injecting HTTPS proxy in front of the real API server.

Some failures a client must survive never happen on demand: a 5xx or a 429 with Retry-After,
an unreachable server, a watch cut mid-stream, a watch resumed from history etcd has compacted
(410 Gone). Requests pass through unchanged (the client's bearer token is forwarded; the proxy
has no identity of its own) unless a test has asked for one of these. The proxy also records
every request it sees (`seen`), so a test can count what a client asked of the API server.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .pki import KeyPair

_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
    "host",
    "content-length",
}
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass
class _Fault:
    verb: str
    resource: str
    status: int
    times: int
    message: str
    retry_after: int | None = None
    where: str = ""


@dataclass(frozen=True)
class Seen:
    """One request as the API server's audit log would name it."""

    verb: str
    resource: str
    path: str
    status: int


def _verb_and_resource(method: str, path: str) -> tuple[str, str]:
    """Kubernetes' verb and resource of a request path (`/apis/batch/v1/namespaces/x/jobs`)."""
    url = urlsplit(path)
    parts = [p for p in url.path.split("/") if p]
    parts = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if parts[:1] == ["namespaces"] and len(parts) > 2:
        parts = parts[2:]
    resource = parts[0] if parts else ""
    query = parse_qs(url.query)
    if method == "GET":
        verb = (
            "watch"
            if query.get("watch", ["false"])[0].lower() in ("true", "1")
            else ("get" if len(parts) > 1 else "list")
        )
    else:
        verb = _VERBS.get(method, method.lower())
    return verb, resource


class FaultProxy:
    def __init__(self, upstream: str, ca: Path, serving: KeyPair) -> None:
        self.upstream = urlsplit(upstream)
        self._client_context = ssl.create_default_context(cafile=str(ca))
        self._server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_context.load_cert_chain(str(serving.cert), str(serving.key))
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._watches: set[socket.socket] = set()
        self._expire_next_watch = False
        self._seen: list[Seen] = []
        self.port = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._serve()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    # -- what a test asks for -------------------------------------------------------------------

    def fail_next(
        self,
        verb: str,
        resource: str,
        status: int,
        times: int = 1,
        message: str = "",
        retry_after: int | None = None,
        where: str = "",
    ) -> None:
        """The next `times` requests of `verb` (create, list, …) on `resource` whose path holds
        `where` answer `status` (with a `Retry-After` header if given, as a 429 carries)."""
        with self._lock:
            self._faults.append(
                _Fault(
                    verb,
                    resource,
                    status,
                    times,
                    message or http.client.responses.get(status, ""),
                    retry_after,
                    where,
                )
            )

    def seen(self) -> list[Seen]:
        """Every request since the proxy started or `forget()`, in arrival order."""
        with self._lock:
            return list(self._seen)

    def forget(self) -> None:
        with self._lock:
            self._seen.clear()

    def _record(self, verb: str, resource: str, path: str, status: int) -> None:
        with self._lock:
            self._seen.append(Seen(verb, resource, urlsplit(path).path, status))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    @contextlib.contextmanager
    def unreachable(self) -> Iterator[None]:
        """Nothing listens on the proxy's port (connection refused) inside the block."""
        self.cut_watches()
        self._close()
        try:
            yield
        finally:
            self._serve(self.port)

    def cut_watches(self, expired: bool = False) -> None:
        """Close every open watch; with `expired`, the next watch that resumes from a
        resourceVersion is told 410 Gone, as after etcd compacted that history."""
        with self._lock:
            self._expire_next_watch = self._expire_next_watch or expired
            watches, self._watches = list(self._watches), set()
        for sock in watches:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.cut_watches()
        self._close()

    # -- serving --------------------------------------------------------------------------------

    def _serve(self, port: int = 0) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        httpd.daemon_threads = True
        httpd.socket = self._server_context.wrap_socket(httpd.socket, server_side=True)
        self.port = httpd.server_address[1]
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, daemon=True, name="fault-proxy").start()

    def _close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def _take_fault(self, verb: str, resource: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if (
                    fault.verb == verb
                    and fault.resource == resource
                    and fault.where in path
                    and fault.times > 0
                ):
                    fault.times -= 1
                    return fault
        return None

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else None
        verb, resource = _verb_and_resource(request.command, request.path)
        fault = self._take_fault(verb, resource, request.path)
        if fault is not None:
            self._record(verb, resource, request.path, fault.status)
            self._answer(
                request,
                fault.status,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": fault.message,
                    "reason": http.client.responses.get(fault.status, ""),
                    "code": fault.status,
                },
                {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)},
            )
            return
        query = parse_qs(urlsplit(request.path).query)
        if verb == "watch" and query.get("resourceVersion", ["0"])[0] not in ("", "0"):
            with self._lock:
                expired, self._expire_next_watch = self._expire_next_watch, False
            if expired:
                version = query["resourceVersion"][0]
                event = {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Failure",
                        "message": f"too old resource version: {version}",
                        "reason": "Expired",
                        "code": 410,
                    },
                }
                self._answer(request, 200, event)
                return
        self._forward(request, body, watch=verb == "watch", seen=(verb, resource))

    def _answer(
        self,
        request: BaseHTTPRequestHandler,
        status: int,
        document: object,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(document).encode() + b"\n"  # a watch event is one line
        request.send_response(status)
        for key, value in (headers or {}).items():
            request.send_header(key, value)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _forward(
        self,
        request: BaseHTTPRequestHandler,
        body: bytes | None,
        watch: bool,
        seen: tuple[str, str] = ("", ""),
    ) -> None:
        upstream = http.client.HTTPSConnection(
            self.upstream.hostname or "127.0.0.1",
            self.upstream.port,
            context=self._client_context,
            timeout=None if watch else 60,
        )
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        sock = request.connection
        if watch:
            with self._lock:
                self._watches.add(sock)
        try:
            upstream.request(request.command, request.path, body=body, headers=headers)
            answer = upstream.getresponse()
            self._record(*seen, request.path, answer.status)
            request.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in _HOP:
                    request.send_header(key, value)
            length = answer.getheader("Content-Length")
            if length is not None:
                data = answer.read()
                request.send_header("Content-Length", str(len(data)))
                request.end_headers()
                request.wfile.write(data)
                return
            request.send_header("Transfer-Encoding", "chunked")
            request.end_headers()
            while chunk := answer.read1(65536):
                request.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                request.wfile.flush()
            request.wfile.write(b"0\r\n\r\n")
        except (OSError, http.client.HTTPException):  # a watch cut by `cut_watches` or `close`
            request.close_connection = True
        finally:
            upstream.close()
            with self._lock:
                self._watches.discard(sock)
