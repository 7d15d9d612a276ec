"""`%pipeline`: run a pipeline from a notebook and watch its steps under the cell.

    %pipeline -f nightly.yml [-P name=value]... [--now] [--wait|--detach]
    %pipeline ID                  # the live view of an existing pipeline

A spec with a `schedule:` section becomes a schedule unless `--now` asks for one run now.
The widget draws the steps by depth (a step sits right of the steps it depends on), each
coloured by its state, and follows `pipeline` events (or, without a server, looks again
once a second).
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

import ipywidgets as w

from kubelab.errors import FieldError, ValidationError
from kubelab.magics.options import MagicParser
from kubelab.magics.widgets import LiveWidget
from kubelab.options import param
from kubelab.records import FAILED, RUNNING, STOPPED, SUCCEEDED

STEP_COLORS = {
    "succeeded": "#1a7f37",
    "failed": "#cf222e",
    "running": "#0969da",
    "submitting": "#0969da",
    "stopped": "#6e7781",
    "waiting": "#d0d7de",
}
DONE = (SUCCEEDED, FAILED, STOPPED)  # a pipeline ends in one of these


def pipeline_parser() -> MagicParser:
    p = MagicParser("pipeline", "Run a pipeline from a spec file, or show one by its id.")
    p.add_argument("id", nargs="?", help="an existing pipeline's id")
    p.add_argument("-f", "--file", help="a pipeline spec (YAML/JSON)")
    p.add_argument("-P", "--param", action="append", type=param, default=[], metavar="NAME=VALUE")
    p.add_argument("--now", action="store_true", help="run once now even if the spec has a schedule")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--wait", action="store_true")
    when.add_argument("--detach", action="store_true")
    return p


def levels(steps: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Steps by depth: a step's column is one more than its deepest dependency's."""
    depth: dict[str, int] = {}
    by_name = {s["name"]: s for s in steps}

    def of(name: str) -> int:
        if name not in depth:
            deps = [d for d in by_name[name].get("depends_on") or [] if d in by_name]
            depth[name] = 1 + max((of(d) for d in deps), default=-1)
        return depth[name]

    columns: list[list[dict[str, Any]]] = []
    for step in steps:
        column = of(step["name"])
        columns.extend([] for _ in range(column + 1 - len(columns)))
        columns[column].append(step)
    return columns


def graph_html(record: dict[str, Any]) -> str:
    columns = []
    for column in levels(record.get("steps") or []):
        boxes = []
        for s in column:
            color = STEP_COLORS.get(s["state"], "#6e7781")
            text = "#24292f" if s["state"] == "waiting" else "white"
            extra = " (cached)" if s.get("cached") else f" #{s['attempt']}" if s.get("attempt", 0) > 1 else ""
            reason = html.escape(s.get("reason") or "", quote=True)
            boxes.append(
                f"<div class='kubelab-step' data-state='{s['state']}' title='{reason}' style='background:"
                f"{color};color:{text};border-radius:6px;padding:4px 10px;margin:4px 0'>"
                f"<b>{html.escape(s['name'])}</b> <small>{html.escape(s['kind'])} · {s['state']}{extra}"
                f"</small><br><code style='color:inherit'>{s.get('id') or ''}</code></div>"
            )
        column_html = "".join(boxes)
        columns.append(f"<div style='display:inline-block;vertical-align:middle'>{column_html}</div>")
    return "<div>" + " <span style='font-size:18px'>→</span> ".join(columns) + "</div>"


def pipeline_text(record: dict[str, Any]) -> str:
    lines = [f"pipeline {record['id']}  {record['name']}  {record['status']}  {record.get('reason') or ''}"]
    for s in record.get("steps") or []:
        lines.append(
            f"  {s['name']}: {s['state']} {s['kind']} {s.get('id') or ''}"
            + (f" - {s['reason']}" if s.get("reason") else "")
        )
    return "\n".join(lines)


class PipelineWidget(LiveWidget):
    """The pipeline's steps as a graph coloured by state, its status, and a Stop button."""

    def __init__(self, service: Any, record: dict[str, Any]) -> None:
        self.service = service
        self.record = dict(record)
        self.header = w.HTML()
        self.graph = w.HTML()
        self.panel = w.HTML()
        self.stop_button = w.Button(description="Stop pipeline", icon="stop", button_style="danger")
        self.stop_button.on_click(self.guarded(self.stop))
        super().__init__([self.header, self.graph, self.stop_button, self.panel])
        self.render()

    @property
    def done(self) -> bool:  # type: ignore[override]
        return self.record.get("status") in DONE

    def summary(self) -> str:
        return pipeline_text(self.record)

    def refresh(self) -> None:
        self.record.update(self.service.pipeline(self.id))
        self.render()

    def on_event(self, kind: str, data: Any) -> None:
        if kind == "connected":
            self.refresh()
        elif kind == "pipeline" and data.get("id") == self.id:
            self.record.update(data)
            self.render()

    def tick(self) -> None:
        if not getattr(self.service, "remote", True) and not self.done:
            self.refresh()  # no server, so no `pipeline` events: look again

    def render(self) -> None:
        from kubelab.magics import views

        status = self.record.get("status") or RUNNING
        reason = html.escape(self.record.get("reason") or "")
        self.header.value = (
            f"<b>pipeline {html.escape(self.record.get('name') or '')}</b> "
            f"<code>{self.id}</code> {views.badge(status)} "
            f"<span style='color:#6e7781'>{reason}</span>"
        )
        self.graph.value = graph_html(self.record)
        self.stop_button.disabled = self.done

    def stop(self) -> None:
        self.record.update(self.service.stop_pipeline(self.id))
        self.render()


def run(magics: Any, line: str) -> None:
    """The body of `%pipeline` (registered in `commands.py`)."""
    from IPython.display import display

    from kubelab.options import parse_params
    from kubelab.sweeps.config_files import read_document

    parser = pipeline_parser()
    args = parser.read(line)
    if args is None:
        return
    svc = magics.service
    if args.id and args.file:
        parser.error("give a pipeline id or -f FILE, not both")
    if args.id:
        record = svc.pipeline(args.id)
    elif args.file:
        data, origin = read_document(Path(args.file), "file")
        base = origin.parent if origin else Path.cwd()
        params = parse_params(args.param)
        if isinstance(data, dict) and data.get("schedule") is not None:
            if not args.now:
                made = svc.submit_schedule(data, base_dir=base, params=params)
                print(
                    f"scheduled {made['name']} ({made['cron']} {made['timezone']}): "
                    f"schedule {made['id']}, next at {made['next_at']}"
                )
                return
            from kubelab.schedules.spec import parse_schedule

            problems = parse_schedule(data["schedule"])[1]
            if problems:
                raise ValidationError("invalid pipeline spec", problems)
            data = {k: v for k, v in data.items() if k != "schedule"}
        record = svc.submit_pipeline(data, base_dir=base, params=params)
    else:
        raise ValidationError("nothing to show", [FieldError("file", "give -f FILE or a pipeline id")])
    if args.detach or not magics.widgets():
        print(pipeline_text(record), flush=True)
    else:
        from kubelab.magics.widgets import Live

        widget = PipelineWidget(svc, record)
        display(widget)
        Live.of(svc).watch(widget)
    if args.wait:
        while record.get("status") not in DONE:
            time.sleep(0.5)
            record = svc.pipeline(record["id"])
        print(pipeline_text(record), flush=True)
