"""REST handlers: thin translations between HTTP and the `Lab`.

Every handler requires authentication (the server's own, or the token the server gave
its kernels). Errors are JSON `{error, detail, fields}` with a 4xx/5xx status.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jupyter_server.auth.identity import User
from jupyter_server.base.call_context import CallContext
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.iostream import StreamClosedError

from kubelab.errors import FieldError, KubelabError, ValidationError

HEARTBEAT = 15.0


def api(method: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """Authentication plus the JSON error shape, for every endpoint."""

    @web.authenticated
    @functools.wraps(method)
    async def wrapper(self: KubelabHandler, *args: Any, **kwargs: Any) -> None:
        try:
            await method(self, *args, **kwargs)
        except KubelabError as exc:
            self.set_status(exc.status)
            self.finish(json.dumps(exc.to_json()))

    return wrapper


class KubelabHandler(APIHandler):
    @property
    def kubelab(self):  # the KubeLabApp
        return self.settings["kubelab"]

    @property
    def lab(self):
        return self.kubelab.lab

    async def prepare(self) -> None:  # type: ignore[override]
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        expected = self.kubelab.kernel_token
        if scheme.lower() in ("token", "bearer") and token and hmac.compare_digest(token, expected):
            # The kernels' credential: these requests come from the user's own kernels.
            CallContext.set(CallContext.JUPYTER_HANDLER, self)
            user = User(username=self.kubelab.lab.user or "kernel")
            self.current_user = self._jupyter_current_user = user
            return
        await super().prepare()

    def body(self) -> Any:
        try:
            return json.loads(self.request.body or b"{}")
        except json.JSONDecodeError as exc:
            raise ValidationError(
                "request body is not valid JSON", [FieldError("body", f"line {exc.lineno}: {exc.msg}")]
            ) from exc

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data, default=str))

    def int_argument(self, name: str, default: int | None) -> int | None:
        raw = self.get_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            reason = f"must be a whole number, not {raw!r}"
            raise ValidationError(f"invalid {name}", [FieldError(name, reason)]) from None
        if value < 0:
            raise ValidationError(f"invalid {name}", [FieldError(name, "must be 0 or more")])
        return value

    def workspace_dir(self) -> Path:
        """The folder a request's relative paths start from: `?cwd=` inside the server's root."""
        root = Path(self.kubelab.root_dir).resolve()
        cwd = self.get_argument("cwd", "")
        target = (root / cwd.lstrip("/")).resolve()
        if target != root and root not in target.parents:
            raise ValidationError("invalid cwd", [FieldError("cwd", f"'{cwd}' is outside the workspace")])
        if not target.is_dir():
            raise ValidationError("invalid cwd", [FieldError("cwd", f"'{cwd}' is not a directory")])
        return target


class ExperimentsHandler(KubelabHandler):
    @api
    async def get(self) -> None:
        """List experiments: `?query=PQL&sort=-created_at&limit=50&offset=0`."""
        items, total = self.lab.list(
            self.get_argument("query", ""),
            self.get_argument("sort", ""),
            self.int_argument("limit", None),
            self.int_argument("offset", 0) or 0,
        )
        self.reply({"items": items, "total": total})

    @api
    async def post(self) -> None:
        """Submit an experiment spec."""
        record = self.lab.submit(self.body(), base_dir=self.workspace_dir(), confine=True)
        self.kubelab.events.publish("experiment", record)
        self.reply(record, status=201)


class ExperimentHandler(KubelabHandler):
    @api
    async def get(self, run_id: str) -> None:
        self.reply(self.lab.get(run_id))

    @api
    async def delete(self, run_id: str) -> None:
        await asyncio.to_thread(self.lab.delete, run_id)
        self.kubelab.events.publish("deleted", {"id": run_id})
        self.set_status(204)
        self.finish()


class StopHandler(KubelabHandler):
    @api
    async def post(self, run_id: str) -> None:
        self.reply(await asyncio.to_thread(self.lab.stop, run_id))


class MetricsHandler(KubelabHandler):
    @api
    async def get(self, run_id: str) -> None:
        self.reply({"id": run_id, "points": self.lab.metrics(run_id)})


class LogsHandler(KubelabHandler):
    @api
    async def get(self, run_id: str) -> None:
        """A replica's output as text; `?follow=1` streams until the experiment ends."""
        follow = self.get_argument("follow", "0") in ("1", "true", "yes")
        chunks = self.lab.logs(run_id, self.int_argument("replica", 0) or 0, follow)
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("X-Accel-Buffering", "no")
        done = object()
        try:
            while True:
                chunk = await asyncio.to_thread(next, chunks, done)
                if chunk is done or self.request.connection.stream.closed():
                    break
                self.write(chunk)
                await self.flush()
        except StreamClosedError:
            pass
        finally:
            chunks.close()
        self.finish()


class ResourcesHandler(KubelabHandler):
    @api
    async def get(self) -> None:
        self.reply(await asyncio.to_thread(self.lab.resources))


class EventsHandler(KubelabHandler):
    @api
    async def get(self) -> None:
        """Server-sent events: `experiment`, `metrics`, `deleted`, `sweep`, `tensorboard`."""
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        hub = self.kubelab.events
        queue = hub.subscribe()
        try:
            self.write(": connected\n\n")
            await self.flush()
            while True:
                try:
                    event = await asyncio.wait_for(queue.get(), HEARTBEAT)
                except asyncio.TimeoutError:
                    self.write(": ping\n\n")
                else:
                    if event is None:
                        break
                    self.write(f"event: {event.kind}\ndata: {json.dumps(event.data, default=str)}\n\n")
                await self.flush()
        except StreamClosedError:
            pass
        finally:
            hub.unsubscribe(queue)
        if not self._finished:
            self.finish()


class OpenAPIHandler(KubelabHandler):
    @api
    async def get(self) -> None:
        from kubelab.server_extension.openapi import document

        self.reply(document(ROUTES))


ID = r"(?P<run_id>[^/]+)"
ROUTES: list[tuple[str, type[KubelabHandler]]] = [
    (r"experiments", ExperimentsHandler),
    (rf"experiments/{ID}", ExperimentHandler),
    (rf"experiments/{ID}/stop", StopHandler),
    (rf"experiments/{ID}/logs", LogsHandler),
    (rf"experiments/{ID}/metrics", MetricsHandler),
    (r"resources", ResourcesHandler),
    (r"events", EventsHandler),
    (r"openapi.json", OpenAPIHandler),
]
