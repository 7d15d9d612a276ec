"""REST resources for sweeps: thin translations between HTTP and `kubelab.sweeps.service.Sweeps`.

    POST   sweeps               a sweep spec, an NNI config (or {"nni": {...}}), a Polyaxon
                                group or v1 operation with a matrix → 201; a spec's `space`
                                may be JSON or YAML text (the sweep dialog's editor)
    GET    sweeps               {"items": [sweep records]}
    GET    sweeps/<id>          the record with trials, best trial, importance and spec
    GET    sweeps/<id>/metrics  {"trials": [{trial, id, result, points}]}: every trial's curves
    PATCH  sweeps/<id>          extend the budget: {"max_trials": 50} and/or {"max_duration": "2h"}
    POST   sweeps/<id>/stop     stop the sweep and its running trials
    POST   sweeps/<id>/resume   resume, optionally with a budget in the body

`ROUTES` joins the main table in `routes.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.sweeps.config_files import parse_text
from kubelab.sweeps.service import Sweeps


class SweepHandlerBase(KubelabHandler):
    auth_resource = "kubelab.sweeps"

    @property
    def sweeps(self) -> Sweeps:
        return Sweeps(self.lab)

    def body(self) -> Any:
        """JSON that refuses duplicate keys: a search space naming `lr` twice is a mistake."""
        return parse_text(self.body_text(), "json", "body")

    def publish(self, record: dict[str, Any]) -> None:
        self.kubelab.events.publish("sweep", record)


class SweepsHandler(SweepHandlerBase):
    @api("read")
    async def get(self) -> None:
        """List sweeps, newest first."""
        self.reply({"items": await asyncio.to_thread(self.sweeps.list)})

    @api("execute")
    async def post(self) -> None:
        """Create and start a sweep from a sweep spec, an NNI config or a Polyaxon search
        (`kubelab.formats.sweep_mapping`); `space` may be JSON or YAML text."""
        body = space_from_text(self.body())
        record = await asyncio.to_thread(self.sweeps.create, body, self.workspace_dir(), True)
        self.publish(record)
        self.reply(record, status=201)


class SweepHandler(SweepHandlerBase):
    @api("read")
    async def get(self, sweep_id: str) -> None:
        """One sweep with its trials table, best trial and parameter importance."""
        self.reply(await asyncio.to_thread(self.sweeps.get, sweep_id))

    @api("execute")
    async def patch(self, sweep_id: str) -> None:
        """Extend the budget: `max_trials`, `max_duration`, `max_failed_trials`."""
        record = await asyncio.to_thread(self.sweeps.extend, sweep_id, self.body())
        self.publish(record)
        self.reply(record)


class SweepMetricsHandler(SweepHandlerBase):
    @api("read")
    async def get(self, sweep_id: str) -> None:
        """Every trial's reported points with the sweep's verdict on the trial (pruned...)."""
        self.reply({"trials": await asyncio.to_thread(self.sweeps.metrics, sweep_id)})


class SweepStopHandler(SweepHandlerBase):
    @api("write")
    async def post(self, sweep_id: str) -> None:
        """Stop a sweep and its running trials."""
        record = await asyncio.to_thread(self.sweeps.stop, sweep_id)
        self.publish(record)
        self.reply(record)


class SweepResumeHandler(SweepHandlerBase):
    @api("execute")
    async def post(self, sweep_id: str) -> None:
        """Resume a stopped or finished sweep; the body may raise max_trials or max_duration."""
        record = await asyncio.to_thread(self.sweeps.resume, sweep_id, self.body())
        self.publish(record)
        self.reply(record)


def space_from_text(body: Any) -> Any:
    """A spec whose `space` is text (JSON or YAML, as typed in the sweep dialog) with the
    space parsed; parse errors name `space` and the line. Anything else is left as it is."""
    if isinstance(body, dict) and isinstance(body.get("space"), str):
        text = body["space"]
        kind = "json" if text.lstrip().startswith("{") else "yaml"
        return {**body, "space": parse_text(text, kind, "space")}
    return body


SWEEP_ID = r"(?P<sweep_id>[^/]+)"
ROUTES: list[tuple[str, type[KubelabHandler]]] = [
    (r"sweeps", SweepsHandler),
    (rf"sweeps/{SWEEP_ID}", SweepHandler),
    (rf"sweeps/{SWEEP_ID}/metrics", SweepMetricsHandler),
    (rf"sweeps/{SWEEP_ID}/stop", SweepStopHandler),
    (rf"sweeps/{SWEEP_ID}/resume", SweepResumeHandler),
]
