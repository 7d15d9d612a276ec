"""Services through the Jupyter server: `/kubelab/api/services` and the proxy to each service.

`/kubelab/api/services` starts (`execute`), lists, shows, stops and deletes services (`write`).
A service is reached at `/kubelab/services/<id>/…`, behind the server's own login (its cookie
and XSRF check, or a token): an API call (a prediction) is forwarded to a ready replica (on
loopback, or a ready pod of the version on a cluster) and its answer passed through as it is,
the model server's 4xx included. A page a
browser navigates to is never rendered on Jupyter's origin: as with TensorBoard, the entry
redirects to a capability URL `/kubelab/service-view/<secret>/…` whose answers are sandboxed
(`kubelab.tensorboard.sandbox`), and every answer of the entry itself carries the same sandbox
policy, so HTML a service returns cannot act as the user (a cluster service's pages are not
rendered: they have no capability here). The proxy knows only the services' own replicas: it
cannot be pointed elsewhere, and on a cluster the server, in the notebook's pod, reaches what
the notebook reaches and no more.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode

import aiohttp
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from kubelab.backends.kubernetes.serving_routes import parse_assignments
from kubelab.errors import FieldError, KubelabError, NotFound, ValidationError
from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.server_extension.tensorboard import HOP_BY_HOP, NOT_FORWARDED
from kubelab.serving.service import Services
from kubelab.serving.traffic_stats import TrafficStats
from kubelab.tensorboard.sandbox import page_policy

NOT_SENT = NOT_FORWARDED | {"x-xsrftoken", "x-xsrf-token"}  # Jupyter's credentials stay here
# a service's cookie would be set on Jupyter's origin; its policy is replaced by the sandbox's
NOT_PASSED = HOP_BY_HOP | {"content-security-policy", "set-cookie"}
POLICY = page_policy(None)  # the sandbox of an answer that brings no policy of its own
TIMEOUT = 300.0


def install(app: Any) -> Services:
    from kubelab.serving.cluster import services as for_backend

    services = cast(Services, for_backend(lab=app.lab))  # the cluster's where the backend has a namespace
    app.service_upstreams = Upstreams(services)
    return services


async def shutdown(app: Any) -> None:
    """The proxy's connections close with the server; the services go on (they are detached)."""
    upstreams = getattr(app, "service_upstreams", None)
    if upstreams is not None:
        await upstreams.close()


class ServicesBase(KubelabHandler):
    auth_resource = "kubelab.services"

    @property
    def services(self) -> Services:
        return self.kubelab.services

    def publish(self, view: dict[str, Any]) -> None:
        self.kubelab.events.publish("service", view)

    @property
    def upstreams(self) -> Upstreams:
        return cast(Upstreams, self.settings["kubelab"].service_upstreams)

    def with_stats(self, view: dict[str, Any]) -> dict[str, Any]:
        """The view with `stats`: the proxy's figures of the last minute (`TrafficStats.view`)."""
        return {**view, "stats": self.upstreams.stats.view(view["id"])}


class ServicesHandler(ServicesBase):
    @api("read")
    async def get(self) -> None:
        """List services: `{"items": [{id, name, version, state, reason, url, replicas, lineage,
        stats...}]}`, `stats` being the proxy's `{window_s, requests, rate, p50_ms, p95_ms, errors}`."""
        views = await asyncio.to_thread(self.services.list)
        self.reply({"items": [self.with_stats(view) for view in views]})

    @api("execute")
    async def post(self) -> None:
        """Start a service from a service spec (`kind: service`: a model, a predictor or a command);
        relative paths start from `?cwd=` in the workspace. 201 with the service."""
        body, base = self.body(), self.workspace_dir()
        view = await asyncio.to_thread(self.services.start, body, base_dir=base, confine=True)
        self.publish(view)
        self.reply(view, status=201)


class ServiceHandler(ServicesBase):
    @api("read")
    async def get(self, service_id: str) -> None:
        """One service: its state, replicas, URL, lineage (the run and file it serves) and the
        proxy's figures of its last minute of requests (`stats`)."""
        self.reply(self.with_stats(await asyncio.to_thread(self.services.get, service_id)))

    @api("write")
    async def delete(self, service_id: str) -> None:
        """Stop a service and remove its record and logs."""
        await asyncio.to_thread(self.services.delete, service_id)
        self.upstreams.stats.forget(service_id)
        self.reply({"id": service_id, "deleted": True})


class ServiceStopHandler(ServicesBase):
    @api("write")
    async def post(self, service_id: str) -> None:
        """Stop every replica of a service; this server's proxy forgets its replica at once."""
        view = await asyncio.to_thread(self.services.stop, service_id)
        self.upstreams.bases.pop(service_id, None)
        self.publish(view)
        self.reply(view)


class ServiceTrafficHandler(ServicesBase):
    @api("execute")
    async def post(self, name: str) -> None:
        """Move or copy traffic between a service's versions on a cluster: `{"traffic": {"2": 10},
        "mirror": {"2": 100}}`, whole percents per version (the one version left out takes the
        rest), as `kubelab service traffic`. Answers every version's view; nothing changes when a
        field is refused."""
        weights, mirror = traffic_body(self.body())
        views = await asyncio.to_thread(self.services.traffic, name, weights, mirror)
        for view in views:
            self.publish(view)
        self.reply({"items": [self.with_stats(view) for view in views]})


def traffic_body(data: Any) -> tuple[dict[str, int], dict[str, int]]:
    """A traffic request's body, checked whole before the cluster is asked: every problem at once."""
    if not isinstance(data, dict):
        reason = f'must be a mapping such as {{"traffic": {{"2": 10}}}}, not {type(data).__name__}'
        raise ValidationError("invalid traffic", [FieldError("body", reason)])
    problems = [FieldError(key, "unknown field (traffic, mirror)") for key in data if key not in TRAFFIC]
    if data.get("traffic") is None:
        problems.append(FieldError("traffic", 'is required: whole percents per version, e.g. {"2": 10}'))
    parsed: dict[str, dict[str, int]] = {}
    for field in TRAFFIC:
        try:
            parsed[field] = parse_assignments(data.get(field) or {}, field)
        except ValidationError as exc:
            problems += exc.fields
    if problems:
        raise ValidationError("invalid traffic", problems)
    return parsed["traffic"], parsed["mirror"]


TRAFFIC = ("traffic", "mirror")


class ServiceLogsHandler(ServicesBase):
    @api("read")
    async def get(self, service_id: str) -> None:
        """A replica's output, as text: `?replica=0`."""
        replica = self.int_argument("replica", 0) or 0
        text = await asyncio.to_thread(self.services.logs, service_id, replica)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.finish(text)


class Upstreams:
    """The proxy's side toward the replicas: kept-alive connections (aiohttp's pool; Tornado's
    simple client opens one per request) and each service's ready replica (a loopback port
    here, a pod's address on a cluster), looked up again at most every `FRESH` seconds or when
    a replica did not answer."""

    FRESH = 1.0

    def __init__(self, services: Services) -> None:
        self.services = services
        self.stats = TrafficStats()  # what the proxy measured of each service's requests
        self.bases: dict[str, tuple[float, str | None]] = {}
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(total=TIMEOUT)
            jar = aiohttp.DummyCookieJar()  # a service's cookies are nobody's here
            self._session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False, cookie_jar=jar)
        return self._session

    async def base(self, service_id: str) -> str | None:
        """`http://host:port` of a ready replica, or None while none is."""
        now = time.monotonic()
        cached = self.bases.get(service_id)
        if cached is not None and now - cached[0] < self.FRESH and cached[1] is not None:
            return cached[1]
        base = await asyncio.to_thread(self.services.upstream, service_id)
        self.bases[service_id] = (now, base)
        return base

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def forward(handler: web.RequestHandler, upstreams: Upstreams, service_id: str, path: str) -> None:
    """The request, to a ready replica of the service; its answer back, in the sandbox. Each
    request to a known service is timed into `upstreams.stats`, failures (5xx) counted.

    It runs for every prediction, so it does no more than it must: the body goes on as the bytes
    Tornado read and comes back as the bytes the replica sent, the query is rewritten only when
    it holds a `token`, the replica's address comes from `upstreams` (looked up at most once a
    second, or after a failure) and the connection from its pool."""
    started = time.monotonic()
    request = handler.request
    query = request.query
    if "token" in query:  # Jupyter's token stays here
        query = urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "token"])
    headers = [(k, v) for k, v in request.headers.get_all() if k.lower() not in NOT_SENT]
    body = request.body if request.method not in ("GET", "HEAD", "DELETE", "OPTIONS") else None
    for attempt in (1, 2):  # a refused connection sent nothing: ask again with a fresh replica
        try:
            base = await upstreams.base(service_id)
            view = None if base else await asyncio.to_thread(upstreams.services.get, service_id)
        except KubelabError as exc:
            return _fail(handler, exc.status, exc.to_json())
        if base is None:
            assert view is not None
            reason = f": {view['reason']}" if view["reason"] else ""
            detail = f"service {service_id} is {view['state']}{reason}"
            upstreams.stats.record(service_id, time.monotonic() - started, error=True)
            return _fail(handler, 503, {"error": "unavailable", "detail": detail, "fields": []})
        url = f"{base}{path or '/'}" + (f"?{query}" if query else "")
        try:
            async with upstreams.session.request(
                request.method or "GET", url, headers=headers, data=body, allow_redirects=False
            ) as response:
                content = await response.read()
            break
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:  # a replica restarting, or gone
            upstreams.bases.pop(service_id, None)
            if attempt == 1 and isinstance(exc, aiohttp.ClientConnectorError):
                continue
            detail = f"service {service_id} did not answer: {exc or type(exc).__name__}"
            upstreams.stats.record(service_id, time.monotonic() - started, error=True)
            return _fail(handler, 502, {"error": "backend", "detail": detail, "fields": []})
    upstreams.stats.record(service_id, time.monotonic() - started, error=response.status >= 500)
    handler.set_status(response.status, response.reason)
    passed: set[str] = set()
    for name, value in response.headers.items():
        lower = name.lower()
        if lower in NOT_PASSED:
            continue
        if lower in passed:  # a repeated header (Link, Vary...) keeps every value
            handler.add_header(name, value)
        else:  # the replica's Content-Type replaces Tornado's default (text/html)
            passed.add(lower)
            handler.set_header(name, value)
    theirs = response.headers.get("Content-Security-Policy")
    handler.set_header("Content-Security-Policy", page_policy(theirs) if theirs else POLICY)
    handler.set_header("X-Content-Type-Options", "nosniff")
    handler.set_header("Referrer-Policy", "no-referrer")
    if content and request.method != "HEAD":
        handler.write(content)
    handler.finish()


def _fail(handler: web.RequestHandler, status: int, body: dict[str, Any]) -> None:
    handler.set_status(status)
    handler.set_header("Content-Type", "application/json")
    handler.finish(json.dumps(body))


class ServiceEntry(JupyterHandler):
    """`/kubelab/services/<id>/…`: behind Jupyter's login. Reading is a `read` of services,
    anything else (a prediction, a form) an `execute`; a page navigation is redirected to the
    service's capability URL, anything else forwarded."""

    auth_resource = "kubelab.services"

    @property
    def services(self) -> Services:
        return cast(Services, self.settings["kubelab"].services)

    @property
    def upstreams(self) -> Upstreams:
        return cast(Upstreams, self.settings["kubelab"].service_upstreams)

    @web.authenticated
    @authorized("read")  # type: ignore[untyped-decorator]  # see handlers.api
    async def get(self, service_id: str, path: str | None = None) -> None:
        if self.request.headers.get("Sec-Fetch-Mode") == "navigate" or _wants_page(self.request.headers):
            await self.to_view(service_id, path)
        else:
            await forward(self, self.upstreams, service_id, path or "/")

    @web.authenticated
    @authorized("read")  # type: ignore[untyped-decorator]
    async def head(self, service_id: str, path: str | None = None) -> None:
        await forward(self, self.upstreams, service_id, path or "/")

    @web.authenticated
    @authorized("execute")  # type: ignore[untyped-decorator]
    async def post(self, service_id: str, path: str | None = None) -> None:
        await forward(self, self.upstreams, service_id, path or "/")

    @web.authenticated
    @authorized("execute")  # type: ignore[untyped-decorator]
    async def put(self, service_id: str, path: str | None = None) -> None:
        await forward(self, self.upstreams, service_id, path or "/")

    @web.authenticated
    @authorized("execute")  # type: ignore[untyped-decorator]
    async def delete(self, service_id: str, path: str | None = None) -> None:
        await forward(self, self.upstreams, service_id, path or "/")

    async def to_view(self, service_id: str, path: str | None) -> None:
        try:
            directory = await asyncio.to_thread(self.services.directory, service_id)
            capability = await asyncio.to_thread(directory.capability)
        except (KubelabError, OSError) as exc:
            error = exc if isinstance(exc, KubelabError) else NotFound(f"no service '{service_id}'")
            return _fail(self, error.status, error.to_json())
        kept = [(k, v) for k, v in parse_qsl(self.request.query, keep_blank_values=True) if k != "token"]
        query = f"?{urlencode(kept)}" if kept else ""
        self.set_header("Cache-Control", "no-store")  # the Location holds the capability
        self.set_header("Referrer-Policy", "no-referrer")
        base = self.settings.get("base_url", "/").rstrip("/")
        self.redirect(f"{base}/kubelab/service-view/{capability}{path or '/'}{query}")


def _wants_page(headers: Any) -> bool:
    accept = headers.get("Accept", "")
    return "text/html" in accept and "application/json" not in accept


class ServiceView(web.RequestHandler):
    """`/kubelab/service-view/<capability>/…`: a service's pages, in a sandbox of their own.
    The capability is issued only by `ServiceEntry` to a user Jupyter authorized; no cookie or
    Authorization header is forwarded nor honoured here, so a forged request borrows nothing."""

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", page_policy(None))
        self.set_header("Access-Control-Allow-Origin", "*")  # the sandbox's origin is `null`
        self.set_header("Referrer-Policy", "no-referrer")
        self.set_header("X-Content-Type-Options", "nosniff")

    def check_xsrf_cookie(self) -> None:
        """No ambient credential is accepted on this route: there is nothing to forge."""

    async def get(self, capability: str, path: str | None = None) -> None:
        await self.view(capability, path)

    async def post(self, capability: str, path: str | None = None) -> None:
        await self.view(capability, path)

    async def view(self, capability: str, path: str | None) -> None:
        upstreams = cast(Upstreams, self.settings["kubelab"].service_upstreams)
        service_id = await asyncio.to_thread(_by_capability, upstreams.services, capability)
        if service_id is None:
            return _fail(self, 404, NotFound("no such service view").to_json())
        await forward(self, upstreams, service_id, path or "/")


def _by_capability(services: Services, capability: str) -> str | None:
    import hmac

    for directory in services.store.all():
        try:
            if hmac.compare_digest(directory.capability().encode(), capability.encode()):
                return directory.id
        except OSError:
            continue
    return None


def route_first(web_app: web.Application) -> None:
    """The proxy's routes at the head of the server's table. Tornado tries every extension's
    table, then Jupyter's, a regular expression per route, in order: a prediction was matched
    against 32 before it reached the proxy's (counted in the server's profile), now 1."""
    router = web_app.default_router
    base = web_app.settings["base_url"]
    router.add_rules([(url_path_join(base, pattern), handler) for pattern, handler in PROXY_ROUTES])
    added = router.rules[-len(PROXY_ROUTES) :]  # add_rules appends; Tornado has no insert
    del router.rules[-len(PROXY_ROUTES) :]
    router.rules[:0] = added


SERVICE = r"(?P<service_id>[^/]+)"
ROUTES = [
    (r"services", ServicesHandler),
    (rf"services/{SERVICE}", ServiceHandler),
    (rf"services/{SERVICE}/stop", ServiceStopHandler),
    (rf"services/{SERVICE}/logs", ServiceLogsHandler),
    (r"services/(?P<name>[^/]+)/traffic", ServiceTrafficHandler),
]
PROXY_ROUTES = [
    (r"kubelab/services/(?P<service_id>[^/]+)(?P<path>/.*)?", ServiceEntry),
    (r"kubelab/service-view/(?P<capability>[A-Za-z0-9_-]+)(?P<path>/.*)?", ServiceView),
]
