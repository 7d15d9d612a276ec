"""REST handlers: thin translations between HTTP and the `Experiments`.

Every handler requires authentication (the server's own, or the token the server gave
its kernels). Errors are JSON `{error, detail, fields}` with a 4xx/5xx status.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.identity import User
from jupyter_server.base.call_context import CallContext
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.http1connection import HTTP1Connection
from tornado.iostream import StreamClosedError

from kubelab.errors import FieldError, KubelabError, NotFound, ValidationError
from kubelab.records import RunDirectory
from kubelab.run_preview import FIELDS
from kubelab.server_extension.openapi import MAX_INT_ARGUMENT
from kubelab.server_extension.streams import IDLE
from kubelab.system_series import DEFAULT_POINTS, MAX_POINTS

if TYPE_CHECKING:
    from kubelab.experiments import Experiments
    from kubelab.server_extension.app import KubeLabApp

HEARTBEAT = 15.0


ACTIONS = ("read", "write", "execute")


def api(action: str) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., Awaitable[None] | None]]:
    """Authentication, authorization and the JSON error shape, for every endpoint.

    `action` is what Jupyter's `Authorizer` is asked about, on the handler's `auth_resource`:
    `read`, `write` (changes state), or `execute` (runs code: experiments, sweeps, TensorBoard).
    """
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}, not {action!r}")

    def decorate(method: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None] | None]:
        @web.authenticated
        # jupyter_server types `authorized` as returning a type variable that only a decorated
        # function (not an action string) binds, so mypy sees its result as untyped.
        @authorized(action)  # type: ignore[untyped-decorator]
        @functools.wraps(method)
        async def wrapper(self: KubelabHandler, *args: Any, **kwargs: Any) -> None:
            try:
                await method(self, *args, **kwargs)
            except KubelabError as exc:
                self.set_status(exc.status)
                self.finish(json.dumps(exc.to_json()))

        wrapper.kubelab_action = action  # type: ignore[attr-defined]
        return wrapper

    return decorate


class KubelabHandler(APIHandler):
    auth_resource = "kubelab"

    @property
    def kubelab(self) -> KubeLabApp:
        return cast("KubeLabApp", self.settings["kubelab"])

    @property
    def lab(self) -> Experiments:
        return self.kubelab.lab

    async def prepare(self) -> None:  # type: ignore[override]
        header = self.request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        expected = self.kubelab.kernel_token
        given = token.encode("utf-8", "surrogateescape")  # compare_digest refuses non-ASCII str
        if scheme.lower() in ("token", "bearer") and token and hmac.compare_digest(given, expected.encode()):
            # The kernels' credential: these requests come from the user's own kernels.
            CallContext.set(CallContext.JUPYTER_HANDLER, self)
            user = User(username=self.kubelab.lab.user or "kernel")
            self.current_user = self._jupyter_current_user = user
            return
        await super().prepare()

    def body_text(self) -> str:
        """The request body as text; a body that is not UTF-8 is refused by name."""
        try:
            return (self.request.body or b"").decode("utf-8") or "{}"
        except UnicodeDecodeError as exc:
            reason = f"is not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})"
            raise ValidationError("request body is not valid JSON", [FieldError("body", reason)]) from None

    def body(self) -> Any:
        text = self.body_text()
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                "request body is not valid JSON", [FieldError("body", f"line {exc.lineno}: {exc.msg}")]
            ) from exc
        except (ValueError, RecursionError) as exc:  # an integer of 5,000 digits; 100,000 nested [
            raise ValidationError("request body is not valid JSON", [FieldError("body", str(exc))]) from None

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
        if value > MAX_INT_ARGUMENT:  # a file offset or count beyond any file: refused, not a 500
            reason = f"must be at most {MAX_INT_ARGUMENT}"
            raise ValidationError(f"invalid {name}", [FieldError(name, reason)])
        return value

    def bool_argument(self, name: str) -> bool:
        """`1`/`true`/`yes` or `0`/`false`/`no` (or absent: false); anything else is refused."""
        raw = (self.get_argument(name, None) or "0").lower()
        if raw not in TRUE + FALSE:
            reason = f"must be one of 1, true, yes, 0, false, no, not {raw!r}"
            raise ValidationError(f"invalid {name}", [FieldError(name, reason)])
        return raw in TRUE

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


TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")


class ExperimentsHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self) -> None:
        """List experiments: `?query=PQL&sort=-created_at&limit=50&offset=0`."""
        items, total = await asyncio.to_thread(
            self.lab.list,
            self.get_argument("query", ""),
            self.get_argument("sort", ""),
            self.int_argument("limit", None),
            self.int_argument("offset", 0) or 0,
        )
        self.reply({"items": items, "total": total})

    @api("execute")
    async def post(self) -> None:
        """Submit an experiment spec, or `{"file": "spec.yaml"}`: a spec file in the workspace."""
        body, base = self.body(), self.workspace_dir()
        if isinstance(body, dict) and "file" in body:
            body, base = await asyncio.to_thread(self.spec_file, body, base)
        # Off the loop: the code snapshot copies up to SNAPSHOT_LIMIT bytes.
        record = await asyncio.to_thread(self.lab.submit, body, base_dir=base, confine=True)
        self.kubelab.events.publish("experiment", record)
        self.reply(record, status=201)

    def spec_file(self, body: dict[str, Any], cwd: Path) -> tuple[Any, Path]:
        """The spec a file holds (YAML, JSON or a polyaxonfile), read where the sidebar's "Run
        spec" points; its relative paths start from the file's folder, as with `kubelab run -f`."""
        from kubelab.formats import load_spec_file

        name = body["file"]
        if len(body) > 1:
            others = ", ".join(sorted(k for k in body if k != "file"))
            reason = f"cannot be combined with {others}"
            raise ValidationError("invalid request", [FieldError("file", reason)])
        if not isinstance(name, str) or not name:
            raise ValidationError("invalid request", [FieldError("file", "must be a path to a spec file")])
        root = Path(self.kubelab.root_dir).resolve()
        path = (cwd / name).resolve()
        if root not in path.parents:
            reason = f"'{name}' is outside the workspace"
            raise ValidationError("invalid request", [FieldError("file", reason)])
        return load_spec_file(path), path.parent


class ExperimentHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self, run_id: str) -> None:
        """The record with spec, history and events, plus what the sidebar needs to open files:
        `run_dir_relative` (the run directory relative to the server's root, or null when the
        file browser cannot reach it) and `outputs` (files under `outputs/`)."""
        record = await asyncio.to_thread(self.lab.get, run_id)  # may ask the cluster
        run_dir = Path(record["run_dir"])
        record["run_dir_relative"] = self.relative_to_root(run_dir)
        record["outputs"] = await asyncio.to_thread(list_outputs, RunDirectory(run_dir).outputs_dir)
        self.reply(record)

    def relative_to_root(self, path: Path) -> str | None:
        root = Path(self.kubelab.root_dir).resolve()
        try:
            relative = path.resolve().relative_to(root)
        except ValueError:
            return None
        hidden = any(part.startswith(".") for part in relative.parts)
        if hidden and not getattr(self.contents_manager, "allow_hidden", False):
            return None
        return relative.as_posix()

    @api("write")
    async def delete(self, run_id: str) -> None:
        await asyncio.to_thread(self.lab.delete, run_id)
        self.kubelab.events.publish("deleted", {"id": run_id})
        self.set_status(204)
        self.finish()


OUTPUTS_LISTED = 500  # an experiment writing thousands of files still answers quickly


def list_outputs(folder: Path) -> list[dict[str, Any]]:
    """Files under a run's `outputs/`, as `{path, size}` with POSIX paths relative to it."""
    files: list[dict[str, Any]] = []
    if not folder.is_dir():
        return files
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            files.append({"path": path.relative_to(folder).as_posix(), "size": path.stat().st_size})
            if len(files) >= OUTPUTS_LISTED:
                break
    return files


class OutputHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self, run_id: str, path: str) -> None:
        """One file of the run's `outputs/` (e.g. the executed notebook), for runs the file
        browser cannot reach."""
        data = await asyncio.to_thread(self._read_output, run_id, path)
        self.set_header("Content-Type", "application/octet-stream")
        self.finish(data)

    def _read_output(self, run_id: str, path: str) -> bytes:
        folder = RunDirectory(Path(self.lab.get(run_id)["run_dir"])).outputs_dir.resolve()
        target = (folder / path).resolve()
        if folder not in target.parents or not target.is_file():
            detail = f"no output '{path}' in experiment '{run_id}'"
            raise NotFound(detail, [FieldError("path", "no such file")])
        return target.read_bytes()


class StopHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("write")
    async def post(self, run_id: str) -> None:
        self.reply(await asyncio.to_thread(self.lab.stop, run_id))


class MetricsHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self, run_id: str) -> None:
        self.reply({"id": run_id, "points": await asyncio.to_thread(self.lab.metrics, run_id)})


class SystemHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self, run_id: str) -> None:
        """The run's use of the machine: `summary` (GPU-hours, energy, mean utilisation, what is
        missing and why) and `series` (GPU utilisation, memory, power over time), in at most
        `?points=N` buckets (default 500)."""
        points = self.int_argument("points", DEFAULT_POINTS)
        if points is None or not 1 <= points <= MAX_POINTS:
            reason = f"must be 1 to {MAX_POINTS}"
            raise ValidationError("invalid points", [FieldError("points", reason)])
        system = await asyncio.to_thread(self.lab.system, run_id, points)
        self.reply({"id": run_id, **system})


class LogsHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self, run_id: str) -> None:
        """A replica's output as text; `?follow=1` streams until the experiment ends;
        `?offset=N&length=M` is a byte range; `?timestamps=1` starts each line with its time
        (ISO 8601 UTC) and a space, and the range then counts bytes of that text. Reads are
        bounded chunks, on the log streams' own threads (at most KUBELAB_MAX_LOG_STREAMS)."""
        follow = self.get_argument("follow", "0") in ("1", "true", "yes")
        timestamps = self.bool_argument("timestamps")
        start, length = self.int_argument("offset", 0) or 0, self.int_argument("length", None)
        streams = self.kubelab.log_streams
        with streams.slot():
            build = self.get_argument("replica", None) == "build"  # the build log's tab
            replica: int | str = "build" if build else self.int_argument("replica", 0) or 0
            loop, done = asyncio.get_running_loop(), object()
            chunks = await loop.run_in_executor(
                streams.pool,
                lambda: self.lab.logs(
                    run_id, replica, follow, start=start, length=length, idle=True, timestamps=timestamps
                ),
            )
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.set_header("X-Accel-Buffering", "no")
            try:
                if follow:
                    await self.flush()  # headers now: a follower knows it is connected
                while True:
                    chunk = await loop.run_in_executor(streams.pool, next, chunks, done)
                    if chunk is done or cast(HTTP1Connection, self.request.connection).stream.closed():
                        break
                    if chunk == "":
                        await asyncio.sleep(IDLE)  # waiting holds no thread
                        continue
                    self.write(cast(str, chunk))
                    await self.flush()
            except StreamClosedError:
                pass
            finally:
                cast(Generator[str, None, None], chunks).close()
        self.finish()


class ResourcesHandler(KubelabHandler):
    auth_resource = "kubelab.resources"

    @api("read")
    async def get(self) -> None:
        self.reply(await asyncio.to_thread(self.lab.resources))


class PreviewHandler(KubelabHandler):
    auth_resource = "kubelab.resources"

    @api("read")
    async def get(self) -> None:
        """What a new run would preempt or shrink: `?gpus=2&priority=high` (`&gpu_type=`, `&replicas=`)."""
        query = {
            name: self.get_query_argument(name) for name in FIELDS if name in self.request.query_arguments
        }
        self.reply(await asyncio.to_thread(self.lab.preview, query))


class EventsHandler(KubelabHandler):
    auth_resource = "kubelab.events"

    @api("read")
    async def get(self) -> None:
        """Server-sent events: `experiment`, `metrics`, `deleted`, `sweep`, `pipeline`, `tensorboard`."""
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        hub = self.kubelab.events
        with self.kubelab.event_streams.slot():
            await self.stream_events(hub)
        if not self._finished:
            self.finish()

    async def stream_events(self, hub: Any) -> None:
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
                    self.write(event.text)  # encoded once, in the hub's thread
                await self.flush()
        except StreamClosedError:
            pass
        finally:
            hub.unsubscribe(queue)


ID = r"(?P<run_id>[^/]+)"
ROUTES: list[tuple[str, type[KubelabHandler]]] = [
    (r"experiments", ExperimentsHandler),
    (rf"experiments/{ID}", ExperimentHandler),
    (rf"experiments/{ID}/stop", StopHandler),
    (rf"experiments/{ID}/logs", LogsHandler),
    (rf"experiments/{ID}/metrics", MetricsHandler),
    (rf"experiments/{ID}/system", SystemHandler),
    (rf"experiments/{ID}/outputs/(?P<path>.+)", OutputHandler),
    (r"resources", ResourcesHandler),
    (r"resources/preview", PreviewHandler),
    (r"events", EventsHandler),
]
