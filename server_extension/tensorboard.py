"""TensorBoard through the Jupyter server: the sessions API and the authenticated proxy.

`/kubelab/api/tensorboards` starts, lists and stops sessions; `/kubelab/tensorboard/<id>/…`
forwards to that session's TensorBoard on loopback. The proxy knows only the supervisor's
sessions, so it cannot be pointed at another port, and it sits behind the server's own
authentication (a browser without a login is sent to the login page), so TensorBoard works
through JupyterHub from any browser.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from tornado import httpclient, web
from tornado.ioloop import PeriodicCallback

from kubelab.errors import KubelabError
from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.tensorboard.supervisor import (
    FAILED,
    RUNNING,
    STARTING,
    TensorBoardSession,
    TensorBoardSupervisor,
)

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
NOT_FORWARDED = HOP_BY_HOP | {"host", "cookie", "authorization"}  # Jupyter's credentials stay here


def install(app: Any, idle_timeout: float) -> TensorBoardSupervisor:
    """Create the app's supervisor; publish its changes and stop idle sessions periodically."""
    supervisor = TensorBoardSupervisor(
        app.lab,
        base_url=app.serverapp.base_url,
        idle_timeout=idle_timeout,
        on_change=lambda session: app.events.publish("tensorboard", session.to_json()),
    )
    every = max(1.0, min(60.0, idle_timeout / 4))
    app._tensorboard_reaper = PeriodicCallback(supervisor.reap_idle, every * 1000)
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


class TensorBoardProxy(JupyterHandler):
    """`/kubelab/tensorboard/<session>/…` → that session's TensorBoard on 127.0.0.1.

    Reading a session's pages (TensorBoard's POSTs are data queries) is a `read`."""

    auth_resource = "kubelab.tensorboards"

    @property
    def supervisor(self) -> TensorBoardSupervisor:
        return self.settings["kubelab"].tensorboards

    def check_xsrf_cookie(self) -> None:
        """TensorBoard's page posts its data queries without Jupyter's XSRF token; a same-origin
        Referer stands in for it (a cross-site form post has a foreign or no Referer)."""
        if not hasattr(self, "_jupyter_current_user") or self.token_authenticated:
            return
        if self.request.method in ("GET", "HEAD") or (self.check_origin() and self.check_referer()):
            return
        raise web.HTTPError(403, "cross-site request refused")

    @web.authenticated
    @authorized("read")
    async def get(self, session_id: str, path: str = "") -> None:
        await self.forward(session_id)

    @web.authenticated
    @authorized("read")
    async def head(self, session_id: str, path: str = "") -> None:
        await self.forward(session_id)

    @web.authenticated
    @authorized("read")
    async def post(self, session_id: str, path: str = "") -> None:
        await self.forward(session_id)

    def fail(self, error: KubelabError) -> None:
        self.set_status(error.status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(error.to_json()))

    async def ready(self, session_id: str) -> TensorBoardSession | None:
        try:
            session = self.supervisor.get(session_id)
        except KubelabError as exc:
            self.fail(exc)
            return None
        if session.stopped_on_request and not session.alive:
            self.set_status(410)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.finish(STOPPED_PAGE)
            return None
        if not session.alive:  # stopped when idle (or crashed): a returning page starts it again
            session = self.supervisor.restart(session_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT
        while self.supervisor.check(session) == STARTING and loop.time() < deadline:
            self.supervisor.touch(session_id)
            await asyncio.sleep(0.05)
        if session.state != RUNNING:
            reason = session.reason if session.state == FAILED else "TensorBoard did not start in time"
            self.set_status(502)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"error": "backend", "detail": reason, "fields": []}))
            return None
        return session

    async def forward(self, session_id: str) -> None:
        session = await self.ready(session_id)
        if session is None:
            return
        self.supervisor.touch(session_id)
        upstream = f"http://127.0.0.1:{session.port}"
        headers = {k: v for k, v in self.request.headers.get_all() if k.lower() not in NOT_FORWARDED}
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
            self.set_status(502)
            self.finish(
                {"error": "backend", "detail": f"TensorBoard did not answer: {response.error}", "fields": []}
            )
            return
        self.set_status(response.code, response.reason)
        for name, value in response.headers.get_all():
            lower = name.lower()
            if lower in HOP_BY_HOP:
                continue
            if lower == "location" and value.startswith(upstream):
                value = value[len(upstream) :]
            if lower == "content-security-policy":
                value = value.rstrip("; ") + "; frame-ancestors 'self'"  # inline in JupyterLab only
            self.set_header(name, value)
        if response.body and self.request.method != "HEAD":
            self.write(response.body)
        self.finish()


SESSION = r"(?P<session_id>[^/]+)"
ROUTES = [
    (r"tensorboards", TensorBoardsHandler),
    (rf"tensorboards/{SESSION}", TensorBoardHandler),
]
PROXY_ROUTE = (r"kubelab/tensorboard/(?P<session_id>[^/]+)(?P<path>/.*)?", TensorBoardProxy)
