"""REST for comparing, reopening, annotating and resuming runs (docs/reproducibility.md): thin
translations to `Experiments.diff`, `.reopen`, `.annotate` and `.resume`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError
from kubelab.server_extension.handlers import ID, KubelabHandler, api


def _strings(body: dict[str, Any], name: str) -> list[str]:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError("invalid request", [FieldError(name, "must be a list of strings")])
    return value


class DiffHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("read")
    async def get(self) -> None:
        """Compare two runs: `?a=RUN&b=RUN`: params, metrics, environment and code (nbdime for notebooks)."""
        a, b = self.get_argument("a", ""), self.get_argument("b", "")
        for name, value in (("a", a), ("b", b)):
            if not value:
                raise ValidationError("invalid request", [FieldError(name, "a run id is required")])
        self.reply(await asyncio.to_thread(self.lab.diff, a, b))


class ReopenHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("write")
    async def post(self, run_id: str) -> None:
        """Copy a run's code to `{"dest": "folder"}` (in the workspace, relative to `?cwd=`) with its
        parameters filled in; a run started there records this one as its parent."""
        body = self.body()
        dest = body.get("dest") if isinstance(body, dict) else None
        if not isinstance(dest, str) or not dest.strip():
            raise ValidationError("invalid request", [FieldError("dest", "must be a folder path")])
        root = Path(self.kubelab.root_dir).resolve()
        target = (self.workspace_dir() / dest).resolve()
        if root not in target.parents:
            reason = f"'{dest}' is outside the workspace"
            raise ValidationError("invalid request", [FieldError("dest", reason)])
        made = await asyncio.to_thread(self.lab.reopen, run_id, target)
        made["dest"] = target.relative_to(root).as_posix()
        self.reply(made, status=201)


class NotesHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("write")
    async def post(self, run_id: str) -> None:
        """Edit a run's tags and note: `{"add": [..], "remove": [..], "note": "text"}`."""
        body = self.body()
        if not isinstance(body, dict):
            raise ValidationError("invalid request", [FieldError("body", "must be a JSON object")])
        unknown = sorted(set(body) - {"add", "remove", "note"})
        if unknown:
            raise ValidationError("invalid request", [FieldError(unknown[0], "unknown field")])
        add, remove = _strings(body, "add"), _strings(body, "remove")
        record = await asyncio.to_thread(self.lab.annotate, run_id, add, remove, body.get("note"))
        self.kubelab.events.publish("experiment", record)
        self.reply(record)


class ResumeHandler(KubelabHandler):
    auth_resource = "kubelab.experiments"

    @api("execute")  # it runs the run's code again
    async def post(self, run_id: str) -> None:
        """Start a Stopped run again, the same run, from its latest checkpoint (409 otherwise)."""
        # No event published from here: the runner may have moved the run on already, and
        # this record would then reach the views after the newer one (the index tells them).
        self.reply(await asyncio.to_thread(self.lab.resume, run_id))


ROUTES: list[tuple[str, type[KubelabHandler]]] = [
    (r"diff", DiffHandler),
    (rf"experiments/{ID}/reopen", ReopenHandler),
    (rf"experiments/{ID}/notes", NotesHandler),
    (rf"experiments/{ID}/resume", ResumeHandler),
]
