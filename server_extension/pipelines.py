"""REST resources for pipelines and schedules: thin translations to their services.

    POST   pipelines                {"spec": {...}} or {"file": "path"}, optional "params" → 201
    GET    pipelines                {"items": [pipeline records]}
    GET    pipelines/<id>           the record with each step's experiment or sweep record
    POST   pipelines/<id>/stop      stop the pipeline and its running steps
    POST   pipelines/<id>/resume    run again the steps that did not succeed
    POST   schedules                the same body, for a spec with a `schedule:` section → 201
    GET    schedules                {"items": [schedule records]};  GET schedules/<id>  one
    POST   schedules/<id>/pause     stop firing;  POST schedules/<id>/resume  fire again
    DELETE schedules/<id>           forget the schedule (what it started keeps running)

Paths in a request (the spec file, steps' files and code) stay inside the workspace.
`ROUTES` joins the main table in `routes.py`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError
from kubelab.pipelines.service import Pipelines
from kubelab.schedules.service import Schedules
from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.sweeps.config_files import parse_text, read_document

BODY_FIELDS = ("spec", "file", "params")


class PipelineHandlerBase(KubelabHandler):
    @property
    def pipelines(self) -> Pipelines:
        return Pipelines(self.lab)

    @property
    def schedules(self) -> Schedules:
        return Schedules(self.lab)

    def request_spec(self) -> tuple[Any, Path, dict[str, Any]]:
        """(spec, the folder its paths start from, params) from `{"spec"|"file", "params"}`."""
        text = (self.request.body or b"").decode() or "{}"
        body = parse_text(text, "json", "body")
        if not isinstance(body, dict):
            raise ValidationError("invalid request", [FieldError("body", "must be a JSON object")])
        problems = [
            FieldError(str(k), "unknown field; give spec or file, and params")
            for k in body
            if k not in BODY_FIELDS
        ]
        if ("spec" in body) == ("file" in body):
            problems.append(FieldError("spec", "give exactly one of spec (a mapping) or file (a path)"))
        params = body.get("params") or {}
        if not isinstance(params, dict):
            problems.append(FieldError("params", "must be a mapping of names to values"))
        if problems:
            raise ValidationError("invalid request", problems)
        base = self.workspace_dir()
        if "spec" in body:
            return body["spec"], base, params
        name = body["file"]
        path = (base / str(name)).resolve() if isinstance(name, str) and name else base
        if path == base or base not in path.parents or not path.is_file():
            reason = f"'{name}' is not a file in the workspace"
            raise ValidationError("invalid request", [FieldError("file", reason)])
        data, _ = read_document(path, "file")
        return data, path.parent, params

    def publish(self, record: dict[str, Any]) -> None:
        self.kubelab.events.publish("pipeline", record)


class PipelinesHandler(PipelineHandlerBase):
    auth_resource = "kubelab.pipelines"

    @api("read")
    async def get(self) -> None:
        """List pipelines, newest first."""
        self.reply({"items": await asyncio.to_thread(self.pipelines.list)})

    @api("execute")
    async def post(self) -> None:
        """Create and start a pipeline: `{"spec": {...}}` or `{"file": "path"}`, optional `params`."""
        data, base, params = self.request_spec()
        if isinstance(data, dict) and data.get("schedule") is not None:
            raise ValidationError(
                "invalid request",
                [
                    FieldError(
                        "spec.schedule", "a scheduled pipeline is created with POST /kubelab/api/schedules"
                    )
                ],
            )
        record = await asyncio.to_thread(self.pipelines.create, data, base, True, params)
        self.publish(record)
        self.reply(record, status=201)


class PipelineHandler(PipelineHandlerBase):
    auth_resource = "kubelab.pipelines"

    @api("read")
    async def get(self, pipeline_id: str) -> None:
        """One pipeline with its steps' experiment and sweep records."""
        self.reply(await asyncio.to_thread(self.pipelines.get, pipeline_id))


class PipelineStopHandler(PipelineHandlerBase):
    auth_resource = "kubelab.pipelines"

    @api("write")
    async def post(self, pipeline_id: str) -> None:
        """Stop a pipeline and its running steps."""
        record = await asyncio.to_thread(self.pipelines.stop, pipeline_id)
        self.publish(record)
        self.reply(record)


class PipelineResumeHandler(PipelineHandlerBase):
    auth_resource = "kubelab.pipelines"

    @api("execute")
    async def post(self, pipeline_id: str) -> None:
        """Run again the steps of a stopped or failed pipeline that did not succeed."""
        record = await asyncio.to_thread(self.pipelines.resume, pipeline_id)
        self.publish(record)
        self.reply(record)


class SchedulesHandler(PipelineHandlerBase):
    auth_resource = "kubelab.schedules"

    @api("read")
    async def get(self) -> None:
        """List schedules with their next fire time and recent fires."""
        self.reply({"items": await asyncio.to_thread(self.schedules.list)})

    @api("execute")
    async def post(self) -> None:
        """Schedule an experiment, sweep or pipeline spec that has a `schedule:` section."""
        data, base, params = self.request_spec()
        record = await asyncio.to_thread(self.schedules.create, None, data, base, True, params)
        self.reply(record, status=201)


class ScheduleHandler(PipelineHandlerBase):
    auth_resource = "kubelab.schedules"

    @api("read")
    async def get(self, schedule_id: str) -> None:
        """One schedule: what it starts, its cron, next fire and recent fires."""
        folder = await asyncio.to_thread(self.schedules.get_dir, schedule_id)
        self.reply(await asyncio.to_thread(self.schedules.record, folder))

    @api("write")
    async def delete(self, schedule_id: str) -> None:
        """Remove a schedule; what it started keeps running."""
        await asyncio.to_thread(self.schedules.remove, schedule_id)
        self.set_status(204)
        self.finish()


class SchedulePauseHandler(PipelineHandlerBase):
    auth_resource = "kubelab.schedules"

    @api("write")
    async def post(self, schedule_id: str) -> None:
        """Stop firing a schedule."""
        self.reply(await asyncio.to_thread(self.schedules.pause, schedule_id))


class ScheduleResumeHandler(PipelineHandlerBase):
    auth_resource = "kubelab.schedules"

    @api("execute")
    async def post(self, schedule_id: str) -> None:
        """Fire a paused schedule again, from now on."""
        self.reply(await asyncio.to_thread(self.schedules.resume, schedule_id))


PIPELINE_ID = r"(?P<pipeline_id>[^/]+)"
SCHEDULE_ID = r"(?P<schedule_id>[^/]+)"
ROUTES: list[tuple[str, type[KubelabHandler]]] = [
    (r"pipelines", PipelinesHandler),
    (rf"pipelines/{PIPELINE_ID}", PipelineHandler),
    (rf"pipelines/{PIPELINE_ID}/stop", PipelineStopHandler),
    (rf"pipelines/{PIPELINE_ID}/resume", PipelineResumeHandler),
    (r"schedules", SchedulesHandler),
    (rf"schedules/{SCHEDULE_ID}", ScheduleHandler),
    (rf"schedules/{SCHEDULE_ID}/pause", SchedulePauseHandler),
    (rf"schedules/{SCHEDULE_ID}/resume", ScheduleResumeHandler),
]
