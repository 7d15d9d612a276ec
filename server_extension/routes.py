"""The one route table of `/kubelab/api/`: experiments, sweeps, pipelines,
schedules and TensorBoard sessions.

`openapi.json` is generated from this table, so every served resource is described.
"""

from __future__ import annotations

from kubelab.server_extension import handlers, pipelines, sweeps, tensorboard

API_ROUTES: list[tuple[str, type]] = [
    *handlers.ROUTES,
    *sweeps.ROUTES,
    *pipelines.ROUTES,
    *tensorboard.ROUTES,
]
