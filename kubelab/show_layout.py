"""`kubelab show RUN` for a person: the record laid out in sections with rich, values spelled
as values (`lr 0.5`, not `{'lr': 0.5}`), and its lineage both ways (the run it was reopened
from, the runs reopened from it). Every user-written text goes through `clean` and is given to
rich as `Text`, never as markup, so a name cannot restyle the terminal or forge a line. Piped
or redirected, rich writes the same layout as plain text.
"""

from __future__ import annotations

import io
import sys
from typing import IO, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kubelab.cli_output import clean
from kubelab.records import FAILED, PRUNED, RUNNING, STOPPED, SUCCEEDED
from kubelab.run_timeline import span_rows, timeline

STATE_STYLES = {SUCCEEDED: "green", FAILED: "red", RUNNING: "cyan", STOPPED: "yellow", PRUNED: "yellow"}


def value_text(value: Any) -> str:
    """A value as a person reads it: numbers short, lists joined, nothing as a Python repr."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        return ", ".join(value_text(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}={value_text(v)}" for k, v in value.items()) or "-"
    return str(value)


def _pairs(rows: list[tuple[str, Any]], indent: str = "") -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for key, value in rows:
        shown = f"{value:.1f}s" if key == "duration" and isinstance(value, int | float) else value_text(value)
        grid.add_row(Text(indent + clean(key)), Text(clean(shown)))
    return grid


def _section(title: str, rows: list[tuple[str, Any]]) -> list[Any]:
    return [Text(""), Text(title, style="bold underline"), _pairs(rows, "  ")] if rows else []


def layout(record: dict[str, Any], system: list[str], children: list[dict[str, Any]]) -> Group:
    state = record.get("status", "")
    head = Text()
    head.append(clean(record.get("name", "")), style="bold")
    head.append(f"  {record.get('id')}  ")
    head.append(clean(state), style=STATE_STYLES.get(state, ""))
    head.append(f": {clean(record.get('reason') or '')}")
    about: list[tuple[str, Any]] = [
        (k, record.get(k))
        for k in ("created_at", "started_at", "finished_at", "duration", "exit_code", "backend", "user")
        if record.get(k) is not None
    ]
    for key in ("sweep", "trial", "pipeline", "pipeline_step"):
        if record.get(key) is not None:
            about.append((key, record[key]))
    lineage: list[tuple[str, Any]] = []
    if record.get("parent"):
        lineage.append(("reopened from", record["parent"]))
    for child in children:
        lineage.append(
            ("children" if child is children[0] else "", f"{child['id']} {child['name']} ({child['status']})")
        )
    metrics = list((record.get("metrics") or {}).items())
    if metrics and record.get("step") is not None:
        metrics.append(("(step)", record["step"]))
    resources = [(k, v) for k, v in (record.get("resources") or {}).items() if v not in (None, 0)]
    labels = (
        [("tags", record.get("tags")), ("note", record.get("note"))]
        if record.get("tags") or record.get("note")
        else []
    )
    parts: list[Any] = [head, _pairs(about)]
    parts += _section("Lineage", lineage)
    parts += _section("Parameters", list((record.get("params") or {}).items()))
    parts += _section("Metrics", metrics)
    parts += _section("Timeline (UTC)", span_rows(timeline(record.get("history") or [])))
    parts += _section("Labels", labels)
    parts += _section(
        "Resources", resources + [("gpu_ids", record.get("gpu_ids"))] * bool(record.get("gpu_ids"))
    )
    parts += _section("System", [("", line) for line in system])
    parts += _section("Files", [("run_dir", record.get("run_dir"))] * bool(record.get("run_dir")))
    return Group(*parts)


def print_layout(
    record: dict[str, Any], system: list[str], children: list[dict[str, Any]], file: IO[str] | None = None
) -> None:
    out = file or sys.stdout
    if out.isatty():
        Console(file=out, highlight=False).print(layout(record, system, children))
        return
    buffer = io.StringIO()  # piped: plain text, no padding left at the ends of lines
    Console(file=buffer, width=120, highlight=False, color_system=None).print(
        layout(record, system, children)
    )
    out.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
