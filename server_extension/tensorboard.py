"""TensorBoard through the Jupyter server: the sessions API and the sandboxed proxy.

`/kubelab/api/tensorboards` starts, lists and stops sessions. A session's `url`,
`/kubelab/tensorboard/<id>/…`, sits behind the server's own login (a browser without one is
sent to the login page, so TensorBoard works through JupyterHub from any browser) and
redirects to its capability URL `/kubelab/tensorboard-view/<secret>/…`, which forwards to that
session's TensorBoard on loopback with every answer sandboxed (`kubelab.tensorboard.sandbox`).
The proxy knows only the supervisor's sessions, so it cannot be pointed at another port.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast
from urllib.parse import parse_qsl, urlencode

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from tornado import httpclient, web
from tornado.ioloop import PeriodicCallback

from kubelab.errors import KubelabError
from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.tensorboard.private import TOKEN_HEADER
from kubelab.tensorboard.sandbox import page_policy, with_storage_shim
from kubelab.tensorboard.session import FAILED, RUNNING, STARTING, TensorBoardSession
from kubelab.tensorboard.supervisor import TensorBoardSupervisor

STOPPED_PAGE = (
    "<!doctype html><title>TensorBoard stopped</title>"
    "<p data-kubelab-tensorboard-stopped>This TensorBoard was stopped. Open it again from "
    "the Experiments sidebar, or with <code>%tensorboard</code>.</p>"
)
READY_TIMEOUT = 60.0  # seconds a first request waits for a starting TensorBoard
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
    "content-length",
    "server",
    "date",
}
# Jupyter's credentials stay here; the proxy's token is the proxy's to set
NOT_FORWARDED = HOP_BY_HOP | {"host", "cookie", "authorization", TOKEN_HEADER.lower()}


def install(app: Any, idle_timeout: float) -> TensorBoardSupervisor:
    """Create the app's supervisor; publish its changes and stop idle sessions periodically."""
    supervisor = TensorBoardSupervisor(
        app.lab,
        base_url=app.serverapp.base_url,
        idle_timeout=idle_timeout,
        on_change=lambda session: app.events.publish("tensorboard", session.to_json()),
        guard=True,  # TensorBoard answers only this proxy (its token header), not the machine
    )
    every = max(1.0, min(60.0, idle_timeout / 4))

    def reap() -> None:  # what PeriodicCallback calls: no argument, nothing returned
        supervisor.reap_idle()

    app._tensorboard_reaper = PeriodicCallback(reap, every * 1000)
    return supervisor


def start_reaper(app: Any) -> None:
    app._tensorboard_reaper.start()


def shutdown(app: Any) -> None:
    """The server is stopping: no TensorBoard outlives it."""
    reaper = getattr(app, "_tensorboard_reaper", None)
    if reaper:
        reaper.stop()
    supervisor = getattr(app, "tensorboards", None)
    if supervisor:
        supervisor.stop_all()


class TensorBoardBase(KubelabHandler):
    """What both resources share; each declares only the methods it serves."""

    auth_resource = "kubelab.tensorboards"

    @property
    def supervisor(self) -> TensorBoardSupervisor:
        return self.kubelab.tensorboards

    def _with_base(self, session: TensorBoardSession) -> dict[str, Any]:
        self.supervisor.check(session)
        return session.to_json()


class TensorBoardsHandler(TensorBoardBase):
    @api("read")
    async def get(self) -> None:
        """List TensorBoard sessions: `{"items": [{id, url, logdirs, state, ...}]}`."""
        self.reply({"items": [s.to_json() for s in self.supervisor.list()]})

    @api("execute")
    async def post(self) -> None:
        """Start (or reuse) a session: `{"experiments": [ID...]}`, `{"sweep": ID}`, `{"query": PQL}` or
        `{"project": true}`. 201 when started, 200 when an equal session was running."""
        body = self.body()
        known = {s.id for s in self.supervisor.sessions.values() if s.alive}
        resolved = await asyncio.to_thread(self.supervisor.resolve, body)  # reads the run index
        session = self.supervisor.start(body, resolved)  # on the IOLoop thread: see its docstring
        self.reply(self._with_base(session), status=200 if session.id in known else 201)


class TensorBoardHandler(TensorBoardBase):
    @api("read")
    async def get(self, session_id: str) -> None:
        """One session."""
        self.reply(self._with_base(self.supervisor.get(session_id)))

    @api("write")
    async def delete(self, session_id: str) -> None:
        """Stop a session's TensorBoard."""
        session = self.supervisor.get(session_id)
        await asyncio.to_thread(_stop_process, session)
        self.reply(self.supervisor.stop(session_id).to_json())


def _stop_process(session: TensorBoardSession) -> None:
    """The slow part of a stop (the grace period), off the IOLoop."""
    from kubelab.tensorboard.supervisor import stop_group

    if session.process is not None:
        stop_group(session.process)


class TensorBoardEntry(JupyterHandler):
    """`/kubelab/tensorboard/<session>/…`: behind Jupyter's login, a redirect to the session's
    capability URL (the same path below it). Reading a session's pages is a `read`."""

    auth_resource = "kubelab.tensorboards"

    @web.authenticated
    @authorized("read")  # type: ignore[untyped-decorator]  # see handlers.api
    async def get(self, session_id: str, path: str | None = None) -> None:
        self.enter(session_id, path)

    @web.authenticated
    @authorized("read")  # type: ignore[untyped-decorator]
    async def head(self, session_id: str, path: str | None = None) -> None:
        self.enter(session_id, path)

    def enter(self, session_id: str, path: str | None) -> None:
        try:
            session = self.settings["kubelab"].tensorboards.get(session_id)
        except KubelabError as exc:
            self.set_status(exc.status)
            self.finish(exc.to_json())
            return
        kept = [(k, v) for k, v in parse_qsl(self.request.query, keep_blank_values=True) if k != "token"]
        query = f"?{urlencode(kept)}" if kept else ""  # Jupyter's token stays with Jupyter
        self.set_header("Cache-Control", "no-store")  # the Location holds the capability
        self.set_header("Referrer-Policy", "no-referrer")
        self.redirect(session.view_prefix + (path or "/") + query)


class TensorBoardView(web.RequestHandler):
    """`/kubelab/tensorboard-view/<capability>/…` → that session's TensorBoard on 127.0.0.1,
    every answer in a sandbox (`kubelab.tensorboard.sandbox`).

    The capability in the URL is the credential: it is issued only by `TensorBoardEntry`, to a
    user Jupyter authorized to `read` TensorBoards. Cookies and Authorization headers are never
    forwarded nor honoured here, so a request forged from another site borrows nothing."""

    @property
    def supervisor(self) -> TensorBoardSupervisor:
        return cast(TensorBoardSupervisor, self.settings["kubelab"].tensorboards)

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", page_policy(None))
        self.set_header("Access-Control-Allow-Origin", "*")  # the sandbox's origin is `null`
        self.set_header("Referrer-Policy", "no-referrer")  # links out must not carry the capability
        self.set_header("X-Content-Type-Options", "nosniff")

    def check_xsrf_cookie(self) -> None:
        """No ambient credential is accepted on this route: there is nothing to forge."""

    async def get(self, capability: str, path: str | None = None) -> None:
        await self.forward(capability)

    async def head(self, capability: str, path: str | None = None) -> None:
        await self.forward(capability)

    async def post(self, capability: str, path: str | None = None) -> None:
        await self.forward(capability)

    def options(self, capability: str, path: str | None = None) -> None:
        """The CORS preflight of TensorBoard's data queries (they carry `X-XSRF-Protected`)."""
        self.set_status(204)
        self.set_header("Access-Control-Allow-Methods", "GET, HEAD, POST")
        asked = self.request.headers.get("Access-Control-Request-Headers", "")
        if asked:
            self.set_header("Access-Control-Allow-Headers", asked)
        self.set_header("Access-Control-Max-Age", "600")
        self.finish()

    def fail(self, status: int, body: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    async def ready(self, capability: str) -> TensorBoardSession | None:
        try:
            session = self.supervisor.by_capability(capability)
        except KubelabError as exc:
            self.fail(exc.status, exc.to_json())
            return None
        if session.stopped_on_request and not session.alive:
            self.set_status(410)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(STOPPED_PAGE)
            return None
        if not session.alive:  # stopped when idle (or crashed): a returning page starts it again
            session = self.supervisor.restart(session.id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT
        while self.supervisor.check(session) == STARTING and loop.time() < deadline:
            self.supervisor.touch(session.id)
            await asyncio.sleep(0.05)
        if session.state != RUNNING:
            reason = session.reason if session.state == FAILED else "TensorBoard did not start in time"
            self.fail(502, {"error": "backend", "detail": reason, "fields": []})
            return None
        return session

    async def forward(self, capability: str) -> None:
        session = await self.ready(capability)
        if session is None:
            return
        self.supervisor.touch(session.id)
        upstream = f"http://127.0.0.1:{session.port}"
        headers = {k: v for k, v in self.request.headers.get_all() if k.lower() not in NOT_FORWARDED}
        headers["Accept-Encoding"] = "gzip"  # the one encoding `with_storage_shim` can open
        if session.proxy_token:
            headers[TOKEN_HEADER] = session.proxy_token
        request = httpclient.HTTPRequest(
            upstream + self.request.uri,
            method=self.request.method,
            headers=headers,
            body=self.request.body if self.request.method == "POST" else None,
            follow_redirects=False,
            decompress_response=False,
            request_timeout=300,
            allow_nonstandard_methods=True,
        )
        response = await httpclient.AsyncHTTPClient().fetch(request, raise_error=False)
        if response.code == 599:  # no HTTP answer at all
            detail = f"TensorBoard did not answer: {response.error}"
            self.fail(502, {"error": "backend", "detail": detail, "fields": []})
            return
        self.set_status(response.code, response.reason)
        body = response.body or b""
        html = response.headers.get("Content-Type", "").startswith("text/html")
        for name, value in response.headers.get_all():
            lower = name.lower()
            if lower in HOP_BY_HOP or (html and lower == "content-encoding"):
                continue
            if lower == "location" and value.startswith(upstream):
                value = value[len(upstream) :]
            if lower == "content-security-policy":
                continue
            self.set_header(name, value)
        policy = page_policy(response.headers.get("Content-Security-Policy"))
        self.set_header("Content-Security-Policy", policy)
        if html and body:
            body = with_storage_shim(body, response.headers.get("Content-Encoding"))
        if body and self.request.method != "HEAD":
            self.write(body)
        self.finish()


SESSION = r"(?P<session_id>[^/]+)"
ROUTES = [
    (r"tensorboards", TensorBoardsHandler),
    (rf"tensorboards/{SESSION}", TensorBoardHandler),
]
PROXY_ROUTES = [
    (r"kubelab/tensorboard/(?P<session_id>[^/]+)(?P<path>/.*)?", TensorBoardEntry),
    (r"kubelab/tensorboard-view/(?P<capability>[A-Za-z0-9_-]+)(?P<path>/.*)?", TensorBoardView),
]
