"""The one route table of `/kubelab/api/`: experiments, sweeps, pipelines,
schedules, TensorBoard sessions and services, and `openapi.json`, the API described from this table
(so every served resource is described).
"""

from __future__ import annotations

from kubelab.server_extension import (
    handlers,
    idle_notice,
    pipelines,
    repro,
    services,
    sweeps,
    tensorboard,
    usage,
)
from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.server_extension.openapi import document


class OpenAPIHandler(KubelabHandler):
    auth_resource = "kubelab.api"

    @api("read")
    async def get(self) -> None:
        self.reply(document(API_ROUTES))


API_ROUTES: list[tuple[str, type]] = [
    *handlers.ROUTES,
    *repro.ROUTES,
    *sweeps.ROUTES,
    *pipelines.ROUTES,
    *tensorboard.ROUTES,
    *idle_notice.ROUTES,
    *usage.ROUTES,
    *services.ROUTES,
    (r"openapi.json", OpenAPIHandler),
]
