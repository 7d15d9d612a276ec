"""HTTP front end: parse a request, authenticate, authorize, dispatch, and answer like the API.

Plain `http.server` with one thread per connection, HTTP/1.1 keep-alive, and chunked
transfer encoding for watch and log streams (so a long watch never blocks other requests).
"""

from __future__ import annotations

import datetime
import json
import logging
import socket
import sys
import traceback
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from . import logs, routes
from .auth import Attributes, User
from .errors import ApiError, bad_request, not_found
from .watch import watch_events

if TYPE_CHECKING:
    from .server import ApiHTTPServer

log = logging.getLogger("kubeapi")


def _flag(query: dict[str, str], key: str) -> bool:
    return query.get(key, "").lower() in ("true", "1")


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle's algorithm and
        # the client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # -- plumbing ------------------------------------------------------------------------
    def _read_body(self) -> Any:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not data.strip():
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            raise bad_request(f"the body of the request was not valid JSON: {exc}") from exc

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, content_type: str, chunks: Any) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        try:
            for chunk in chunks:
                data = chunk.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        if self.server.stop_event.is_set():
            self.close_connection = True

    # -- request handling ----------------------------------------------------------------
    def _handle(self, method: str) -> None:
        try:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            body = self._read_body()
            route = routes.parse(url.path, self.server.cluster.registry) if not (
                url.path.startswith("/_control/")) else None
            if route is not None and route.kind in ("version", "healthz", "readyz", "livez"):
                self._public(route.kind)
                return
            user = self.server.cluster.authn.authenticate(self.headers.get("Authorization"))
            if route is None:
                self._control(user, url.path.rsplit("/", 1)[-1], body or {})
            elif route.kind != "resource":
                self._discovery(route)
            else:
                self._resource(method, route, query, body, user)
        except ApiError as exc:
            self._send_json(exc.code, exc.status(), exc.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug in the test server: tell the client and the log
            traceback.print_exc(file=sys.stderr)
            error = ApiError(500, f"Internal error occurred: {type(exc).__name__}: {exc}")
            self._send_json(500, error.status())

    def _public(self, kind: str) -> None:
        if kind == "version":
            major, minor, patch = self.server.cluster.validator.schema.version.split(".")
            self._send_json(200, {"major": major, "minor": minor,
                                  "emulationMajor": major, "emulationMinor": minor,
                                  "minCompatibilityMajor": major,
                                  "minCompatibilityMinor": str(int(minor) - 1),
                                  "gitVersion": f"v{major}.{minor}.{patch}",
                                  "gitCommit": "0" * 40, "buildDate": "2026-01-01T00:00:00Z",
                                  "platform": "linux/amd64", "goVersion": "go1.24",
                                  "compiler": "gc", "gitTreeState": "clean"})
        else:
            payload = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    def _discovery(self, route: routes.Route) -> None:
        registry = self.server.cluster.registry
        doc: dict[str, Any] | None
        if route.kind == "api-versions":
            doc = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": self.server.address}]}
        elif route.kind == "api-groups":
            doc = registry.api_group_list()
        elif route.kind == "api-group":
            doc = registry.api_group(route.group)
        else:
            doc = registry.resource_list(route.group, route.version)
        if doc is None:
            raise routes.not_found_route()
        self._send_json(200, doc)

    def _control(self, user: User, method: str, kwargs: dict[str, Any]) -> None:
        from .control import CONTROL_METHODS

        if not user.is_admin:
            raise ApiError(403, "test controls need the admin token", "Forbidden")
        if method not in CONTROL_METHODS:
            raise not_found("controls", "", method)
        try:
            result = getattr(self.server.kube, method)(**kwargs)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise bad_request(f"{method}: {exc}") from exc
        self._send_json(200, {"result": result})

    def _resource(self, method: str, route: routes.Route, query: dict[str, str], body: Any,
                  user: User) -> None:
        cluster = self.server.cluster
        rt = route.rt
        assert rt is not None
        watch = _flag(query, "watch") or route.watch_path
        verb = routes.verb_for(method, route, watch)
        if route.namespace == "" and rt.namespaced and verb not in ("list", "watch"):
            raise routes.not_found_route()
        resource = f"{rt.plural}/{route.subresource}" if route.subresource else rt.plural
        fault = cluster.faults.take(verb, resource, route.namespace)
        if fault is not None:
            raise fault
        cluster.authz.check(user, Attributes(verb, rt.group, rt.plural, route.subresource,
                                             route.namespace, route.name))
        ns, name, sub = route.namespace, route.name, route.subresource
        writes = {"dry_run": query.get("dryRun") == "All",
                  "field_validation": query.get("fieldValidation", "Warn")}
        if verb == "watch":
            self._watch(route, query)
        elif verb == "list":
            limit = int(query["limit"]) if query.get("limit") else None
            self._send_json(200, cluster.list(rt, ns, query.get("labelSelector"),
                                              query.get("fieldSelector"), limit,
                                              query.get("continue")))
        elif verb == "get" and sub == "log":
            self._log(ns, name, query)
        elif verb == "get":
            self._send_json(200, cluster.get(rt, ns, name))
        elif verb == "create" and sub == "token":
            self._token_request(ns, name, body)
        elif verb == "create" and not name:
            obj, warnings = cluster.create(rt, ns, body, user=user, **writes)
            self._send_json(201, obj, self._warnings(warnings))
        elif verb == "update" and sub in ("", "status"):
            obj, warnings = cluster.update(rt, ns, name, body, subresource=sub, user=user,
                                           **writes)
            self._send_json(200, obj, self._warnings(warnings))
        elif verb == "patch" and sub in ("", "status"):
            content_type = self.headers.get("Content-Type", "")
            obj, warnings = cluster.patch(rt, ns, name, content_type, body, subresource=sub,
                                          user=user, **writes)
            self._send_json(200, obj, self._warnings(warnings))
        elif verb == "delete" and not sub:
            options = body if isinstance(body, dict) else {}
            policy = query.get("propagationPolicy") or options.get("propagationPolicy")
            if policy is None and options.get("orphanDependents") is not None:
                policy = "Orphan" if options["orphanDependents"] else "Background"
            self._send_json(200, cluster.delete(
                rt, ns, name, propagation=policy, preconditions=options.get("preconditions"),
                dry_run=writes["dry_run"] or options.get("dryRun") == ["All"]))
        elif verb == "deletecollection":
            self._send_json(200, cluster.delete_collection(
                rt, ns, query.get("labelSelector"), query.get("fieldSelector"),
                query.get("propagationPolicy")))
        else:
            raise ApiError(405, f"the server does not allow this method on the requested "
                                f"resource ({method} {resource})", "MethodNotAllowed")

    @staticmethod
    def _warnings(warnings: list[str]) -> dict[str, str]:
        if not warnings:
            return {}
        return {"Warning": ", ".join(f'299 - {json.dumps(w)}' for w in warnings)}

    def _watch(self, route: routes.Route, query: dict[str, str]) -> None:
        assert route.rt is not None
        field_selector = query.get("fieldSelector")
        if route.watch_path and route.name:  # /watch/namespaces/ns/pods/name
            name_selector = f"metadata.name={route.name}"
            field_selector = f"{field_selector},{name_selector}" if field_selector else (
                name_selector)
        timeout = float(query.get("timeoutSeconds") or self.server.max_watch_seconds)
        events = watch_events(
            self.server.cluster.store, route.rt, route.namespace or None,
            label_selector=query.get("labelSelector"), field_selector=field_selector,
            resource_version=query.get("resourceVersion"),
            send_initial_events=_flag(query, "sendInitialEvents"),
            allow_bookmarks=_flag(query, "allowWatchBookmarks"),
            timeout=min(timeout, self.server.max_watch_seconds),
            bookmark_interval=self.server.bookmark_interval, stop=self.server.stop_event)
        self._stream("application/json",
                     (json.dumps(e, separators=(",", ":")) + "\n" for e in events))

    def _log(self, namespace: str, name: str, query: dict[str, str]) -> None:
        cluster = self.server.cluster
        container = logs.resolve_container(cluster, namespace, name, query.get("container"))
        tail = int(query["tailLines"]) if query.get("tailLines") else None
        lines = logs.read(cluster, namespace, name, container, follow=_flag(query, "follow"),
                          tail_lines=tail, timestamps=_flag(query, "timestamps"),
                          stop=self.server.stop_event)
        self._stream("text/plain", lines)

    def _token_request(self, namespace: str, name: str, body: Any) -> None:
        cluster = self.server.cluster
        cluster.get(cluster.rt("serviceaccounts"), namespace, name)
        spec = (body or {}).get("spec") or {}
        seconds = int(spec.get("expirationSeconds") or 3600)
        token = cluster.authn.issue_for_service_account(namespace, name)
        expires = (datetime.datetime.now(datetime.timezone.utc)
                   + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._send_json(201, {
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"audiences": spec.get("audiences") or ["https://kubernetes.default.svc"],
                     "expirationSeconds": seconds},
            "status": {"token": token, "expirationTimestamp": expires}})
