"""The GPU culler's warning, held by the user's own server until JupyterLab shows it.

The culler (a hub service) cannot reach a browser; it can reach the user's server through
the hub's proxy with its `access:servers` token. It puts a notice here when a GPU notebook
has been idle for most of its allowance; the lab extension polls for it and shows it with a
"Keep running" button, whose answer the culler reads before it stops anything. The notice
lives in the server's memory: a restarted server has nothing to warn about.
"""

from __future__ import annotations

import time
from typing import Any, cast

from kubelab.errors import FieldError, ValidationError
from kubelab.server_extension.handlers import KubelabHandler, api

MAX_MESSAGE = 2000


def _notice_from(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationError("invalid notice", [FieldError("body", "must be a JSON object")])
    message, deadline = body.get("message"), body.get("deadline")
    errors = []
    if not isinstance(message, str) or not message.strip() or len(message) > MAX_MESSAGE:
        errors.append(FieldError("message", f"must be text of 1 to {MAX_MESSAGE} characters"))
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        errors.append(FieldError("deadline", "must be the stop time in seconds since the epoch"))
    if errors:
        raise ValidationError("invalid notice", errors)
    return {"message": message, "deadline": float(cast(float, deadline)), "posted": time.time(), "kept": None}


class IdleNoticeHandler(KubelabHandler):
    """GET: the current notice (or null); PUT: the culler's warning; DELETE: withdrawn."""

    auth_resource = "kubelab.idle"

    @property
    def notice(self) -> dict[str, Any] | None:
        return self.settings.get("kubelab_idle_notice")

    @api("read")
    async def get(self) -> None:
        self.reply({"notice": self.notice})

    @api("write")
    async def put(self) -> None:
        notice = _notice_from(self.body())
        self.settings["kubelab_idle_notice"] = notice
        self.reply({"notice": notice})

    @api("write")
    async def delete(self) -> None:
        self.settings["kubelab_idle_notice"] = None
        self.set_status(204)
        self.finish()


class KeepRunningHandler(KubelabHandler):
    """POST: the user's "Keep running" answer to the current notice (409 when there is none)."""

    auth_resource = "kubelab.idle"

    @api("write")
    async def post(self) -> None:
        notice = self.settings.get("kubelab_idle_notice")
        if not notice:
            self.reply({"error": "there is no idle warning to answer", "fields": []}, 409)
            return
        notice["kept"] = notice["kept"] or time.time()
        self.reply({"notice": notice})


ROUTES = [
    (r"idle-notice", IdleNoticeHandler),
    (r"idle-notice/keep", KeepRunningHandler),
]
