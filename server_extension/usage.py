"""`GET usage?since=7d`: the sidebar's "My usage", summed by this server from its user's own run
records (kubelab/usage.py), as `kubelab usage` sums them: runs, GPU-hours, energy and mean GPU
utilisation since then, in all and by GPU type."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any

from kubelab.server_extension.handlers import KubelabHandler, api
from kubelab.usage import since_time, total, usage


class UsageHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self) -> None:
        """`{since, runs, gpu_hours, energy_wh, gpu_util, by_type}` for runs created in the last
        `?since=` period (default 7d); a period that is not one is refused by name."""
        since = since_time(self.get_argument("since", "7d"), time.time())
        records, _ = await asyncio.to_thread(self.lab.list, "", "", None)
        self.reply(summed(records, since))


def summed(records: list[dict[str, Any]], since: float) -> dict[str, Any]:
    row = total(records, since).as_json()
    del row["key"]
    by_type = [entry.as_json() for entry in usage(records, "type", since)]
    return {"since": datetime.fromtimestamp(since, timezone.utc).isoformat(), **row, "by_type": by_type}


ROUTES: list[tuple[str, type[KubelabHandler]]] = [(r"usage", UsageHandler)]
