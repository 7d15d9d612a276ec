"""How records look under a cell: plain text everywhere, HTML where a frontend renders it.

Each view is an object with `__repr__` (text: terminals, nbconvert) and `_repr_html_`
(JupyterLab), so one `display(view)` suits every frontend. Charts are tiny inline SVGs:
no plotting library in the kernel.
"""

from __future__ import annotations

import html
import json
import time
from typing import Any

from kubelab.records import (
    FAILED,
    PENDING,
    PREEMPTED,
    PRUNED,
    QUEUED,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    TERMINAL,
    parse_iso,
)

COLORS = {
    SUCCEEDED: "#1a7f37",
    FAILED: "#cf222e",
    RUNNING: "#0969da",
    STOPPED: "#6e7781",
    PRUNED: "#9a6700",
    QUEUED: "#8250df",
    PENDING: "#6e7781",
    PREEMPTED: "#bc4c00",
}
OPEN_TENSORBOARD = "kubelab:open-tensorboard"  # the labextension's command: a main-area tab


def short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def elapsed(record: dict[str, Any], now: float | None = None) -> str:
    """Time since the run started (until it finished), as `1m 05s`."""
    start = record.get("started_at")
    if not start:
        return "-"
    end = record.get("finished_at")
    seconds = (parse_iso(end) if end else (now or time.time())) - parse_iso(start)
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds:02d}s"


def metrics_text(metrics: dict[str, Any], limit: int = 6) -> str:
    return "  ".join(f"{k}={short(v)}" for k, v in list((metrics or {}).items())[:limit])


def experiment_text(record: dict[str, Any]) -> str:
    status = record["status"]
    if record.get("exit_code") not in (None, 0):
        status += f" (exit {record['exit_code']})"
    line = f"{record['id']}  {record['name']}  {status}  {elapsed(record)}"
    if record.get("reason") and record["status"] in (FAILED, STOPPED, PRUNED, QUEUED):
        line += f"  - {record['reason']}"
    metrics = metrics_text(record.get("metrics") or {})
    return line + (f"\n  metrics: {metrics}" if metrics else "")


def badge(status: str) -> str:
    color = COLORS.get(status, "#6e7781")
    return (
        f'<span style="color:white;background:{color};border-radius:8px;padding:1px 7px;'
        f'font-size:11px">{html.escape(status)}</span>'
    )


def sparkline(values: list[float], width: int = 140, height: int = 32) -> str:
    """A polyline of `values` as inline SVG (empty for fewer than two points)."""
    points = [v for v in values if isinstance(v, (int, float)) and v == v][-200:]
    if len(points) < 2:
        return ""
    low, high = min(points), max(points)
    span = (high - low) or 1.0
    step = width / (len(points) - 1)
    coords = " ".join(
        f"{i * step:.1f},{height - 2 - (v - low) / span * (height - 4):.1f}" for i, v in enumerate(points)
    )
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
        f'<polyline fill="none" stroke="#0969da" stroke-width="1.5" points="{coords}"/></svg>'
    )


def system_html(read: dict[str, Any]) -> str:
    """The widget's System line from `GET experiments/<id>/system`: each GPU's latest
    utilisation ("GPU 0: 87%") over its sparkline, the idle notice, and why a source is missing."""
    cells = []
    for gpu in (read.get("series") or {}).get("gpus") or []:
        utils = [u for u in gpu.get("util") or [] if isinstance(u, (int, float))]
        if utils:
            cells.append(
                f"<div style='display:inline-block;margin-right:16px' data-gpu='{int(gpu['index'])}'>"
                f"<div>GPU {int(gpu['index'])}: <b>{utils[-1]:.0f}%</b></div>{sparkline(utils)}</div>"
            )
    summary = read.get("summary") or {}
    notes = []
    if summary.get("notice"):
        notes.append(f"<div style='color:#9a6700'>{html.escape(summary['notice'])}</div>")
    for source, why in sorted((summary.get("missing") or {}).items()):
        notes.append(
            f"<small style='color:#6e7781'>no {html.escape(source)} metrics: {html.escape(why)}</small>"
        )
    return (f"<div>{''.join(cells)}</div>" if cells else "") + "".join(notes)


def span_label(span: dict[str, Any]) -> str:
    """`Running (resumed)`, `Running ×2`: a span as the experiment view names it."""
    label = f"{span['state']} (resumed)" if span.get("resumed") else str(span["state"])
    size = span.get("replicas")
    return f"{label} ×{size}" if isinstance(size, int) else label


def timeline_html(spans: list[dict[str, Any]], now: float | None = None) -> str:
    """The run's timeline (the record's `timeline`, kubelab/run_timeline.py) as one line: a strip
    whose pieces are as wide as their spans (an open one lasts until now), each span's label
    under it, and the latest reason. Empty for a run that only ran: only preemptions and
    resizes are news here."""
    if not any(s.get("state") == PREEMPTED or isinstance(s.get("replicas"), int) for s in spans):
        return ""
    clock = time.time() if now is None else now
    timed = []
    for span in spans:
        seconds = span.get("seconds")
        if not isinstance(seconds, (int, float)):
            open_span = span["state"] not in TERMINAL
            seconds = clock - parse_iso(span["start"]) if open_span else 0.0
        if seconds > 0:
            timed.append((span, float(seconds)))
    total = sum(seconds for _, seconds in timed) or 1.0
    pieces = []
    for span, seconds in timed:
        title = html.escape(f"{span_label(span)}: {span.get('reason') or ''}", quote=True)
        color = COLORS.get(span["state"], "#6e7781")
        pieces.append(
            f"<span title='{title}' data-state='{html.escape(span['state'], quote=True)}' style="
            f"'display:inline-block;height:8px;width:{100 * seconds / total:.2f}%;background:{color}'></span>"
        )
    labels = " → ".join(html.escape(span_label(span)) for span in spans)
    latest = html.escape(spans[-1].get("reason") or "")
    return (
        f"<div data-kubelab-timeline style='display:flex;width:100%;max-width:480px'>{''.join(pieces)}</div>"
        f"<small>{labels}</small><br><small style='color:#6e7781'>{latest}</small>"
    )


def series(points: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per-metric values in step order, from `metrics.jsonl` entries (final values excluded)."""
    result: dict[str, list[float]] = {}
    for point in points:
        if point.get("final"):
            continue
        for name, value in (point.get("metrics") or {}).items():
            result.setdefault(name, []).append(value)
    return result


def tensorboard_html(session: dict[str, Any], url: str, height: int = 640) -> str:
    """TensorBoard in an iframe, with a link to open it in a JupyterLab tab (or a browser tab)."""
    link = html.escape(url, quote=True)
    args = html.escape(json.dumps({"id": session["id"], "url": url}), quote=True)
    runs = ", ".join(html.escape(name) for name in session.get("logdirs", {}))
    return (
        f'<div><a href="{link}" target="_blank" data-commandlinker-command="{OPEN_TENSORBOARD}" '
        f'data-commandlinker-args="{args}">Open TensorBoard in a tab</a>'
        f' <span style="color:#6e7781">session {html.escape(session["id"])}: {runs}</span></div>'
        f'<iframe src="{link}" width="100%" height="{height}" frameborder="0"></iframe>'
    )


class ExperimentsView:
    """`%experiments`: a table."""

    def __init__(self, items: list[dict[str, Any]], total: int) -> None:
        self.items, self.total = items, total

    def __repr__(self) -> str:
        from kubelab.cli_output import table

        text = table(self.items) if self.items else "no experiments"
        if self.total > len(self.items):
            text += f"\n({len(self.items)} of {self.total} shown)"
        return text

    def _repr_html_(self) -> str:
        head = "".join(
            f"<th style='text-align:left'>{h}</th>"
            for h in ("id", "name", "status", "started", "duration", "params", "metrics")
        )
        rows = []
        for r in self.items:
            started = (r.get("started_at") or "")[:19].replace("T", " ")
            duration = f"{r['duration']:.1f}s" if r.get("duration") is not None else ""
            params = html.escape(metrics_text(r.get("params") or {}, 4))
            rows.append(
                f"<tr><td><code>{r['id']}</code></td><td>{html.escape(r['name'])}</td>"
                f"<td>{badge(r['status'])}</td><td>{started}</td><td>{duration}</td>"
                f"<td>{params}</td><td>{html.escape(metrics_text(r.get('metrics') or {}, 4))}</td></tr>"
            )
        more = f"<p>{len(self.items)} of {self.total} shown</p>" if self.total > len(self.items) else ""
        return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"


class GpusView:
    """`%gpus`: what is free, by type."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info

    def __repr__(self) -> str:
        gpus = self.info.get("gpus", {})
        lines = [
            f"backend: {self.info.get('backend')}",
            f"GPUs: {gpus.get('free', 0)} free of {gpus.get('total', 0)}",
        ]
        lines += [f"  {t['type']}: {t['free']}/{t['total']} free" for t in gpus.get("types", [])]
        if gpus.get("queue"):
            lines.append(f"waiting: {len(gpus['queue'])} experiment(s)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(repr(self)) + "</pre>"


class SweepView:
    """A sweep record as text/HTML (the live widget is in `widgets.py`)."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record

    def __repr__(self) -> str:
        return sweep_text(self.record)

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape(sweep_text(self.record)) + "</pre>"


def sweep_progress(record: dict[str, Any]) -> tuple[int, int | None]:
    counts = record.get("counts") or {}
    finished = record.get("finished")
    if finished is None:
        finished = sum(counts.get(k, 0) + counts.get(k.lower(), 0) for k in TERMINAL)
    return int(finished or 0), record.get("max_trials")


def best_text(record: dict[str, Any]) -> str:
    best = record.get("best")
    if not best:
        return "best: none yet"
    objective = (record.get("objective") or {}).get("metric", "value")
    return (
        f"best: trial {best.get('trial')} ({best.get('id')}) {objective}={short(best.get('value'))} "
        f"{metrics_text(best.get('params') or {})}"
    )


def sweep_text(record: dict[str, Any]) -> str:
    finished, most = sweep_progress(record)
    objective = record.get("objective") or {}
    lines = [
        f"sweep {record['id']}  {record.get('name', '')}  {record.get('status')}  "
        f"{finished}/{most if most is not None else '?'} trials finished  "
        f"({objective.get('direction', 'minimize')} {objective.get('metric', 'default')})",
        "  " + best_text(record),
    ]
    if record.get("reason") and record.get("status") not in (RUNNING, None):
        lines.append(f"  {record['reason']}")
    return "\n".join(lines)


def trials_html(trials: list[dict[str, Any]], metric: str) -> str:
    rows = []
    for t in sorted(trials, key=lambda t: (t.get("trial") is None, t.get("trial") or 0)):
        value = (t.get("metrics") or {}).get(metric, "")
        params = html.escape(metrics_text(t.get("params") or {}))
        rows.append(
            f"<tr><td>{t.get('trial', '')}</td><td><code>{t['id']}</code></td>"
            f"<td>{badge(t['status'])}</td><td>{params}</td>"
            f"<td>{html.escape(short(value))}</td></tr>"
        )
    head = f"<tr><th>#</th><th>id</th><th>status</th><th>params</th><th>{html.escape(metric)}</th></tr>"
    return f"<table><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
