"""Live views under a cell (ipywidgets 8), fed by the server's event stream.

One background thread per kernel reads the event stream and updates the widgets it is
watching; ipywidgets syncs trait changes made from a thread, so the views move while the
kernel is idle and the cell has long returned. A second, lighter thread ticks the elapsed
time once a second. Both stop when nothing is left to watch.
"""

from __future__ import annotations

import html
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import ipywidgets as w

from kubelab.errors import KubelabError
from kubelab.magics import views
from kubelab.records import PENDING, TERMINAL, RunDirectory
from kubelab.sweeps.store import RUNNING as SWEEP_RUNNING
from kubelab.sweeps.store import SWEEP_STATES

SWEEP_DONE = frozenset(SWEEP_STATES) - {SWEEP_RUNNING}
SYSTEM_EVERY = 10.0
"""Seconds between re-reads of a live run's system samples (the runner samples every 5 s)."""
SYSTEM_POINTS = 60  # a sparkline's worth


class Live:
    """The event-stream reader shared by every widget of this kernel."""

    _instances: dict[int, Live] = {}

    def __init__(self, service: Any) -> None:
        self.service = service
        self.widgets: weakref.WeakSet[LiveWidget] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.reader: threading.Thread | None = None
        self.ticker: threading.Thread | None = None

    @classmethod
    def of(cls, service: Any) -> Live:
        live = cls._instances.get(id(service))
        if live is None:
            live = cls._instances[id(service)] = cls(service)
        return live

    def watch(self, widget: LiveWidget) -> None:
        with self.lock:
            self.widgets.add(widget)
            for name, target in (("reader", self._read), ("ticker", self._tick)):
                thread = getattr(self, name)
                if thread is None or not thread.is_alive():
                    thread = threading.Thread(target=target, name=f"kubelab-{name}", daemon=True)
                    setattr(self, name, thread)
                    thread.start()

    def active(self) -> list[LiveWidget]:
        with self.lock:
            finished = [x for x in self.widgets if x.done]
            for widget in finished:
                self.widgets.discard(widget)
            return list(self.widgets)

    def _read(self) -> None:
        delay = 0.5
        while self.active():
            try:
                for kind, data in self.service.events():
                    delay = 0.5
                    widgets = self.active()
                    if not widgets:
                        return
                    for widget in widgets:
                        widget.on_event(kind, data)
            except Exception:  # the server restarted or the network blinked: reconnect
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _tick(self) -> None:
        while self.active():
            for widget in self.active():
                widget.tick()
            time.sleep(1.0)


class LiveWidget(w.VBox):  # type: ignore[misc]  # ipywidgets ships no types: VBox is Any
    """A widget whose `text/plain` form is a useful summary (what nbconvert keeps)."""

    done = False
    record: dict[str, Any]

    @property
    def id(self) -> str:
        run_id: str = self.record["id"]
        return run_id

    def summary(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.summary()
        return bundle

    def on_event(self, kind: str, data: Any) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        return None

    def guarded(self, action: Any) -> Any:
        """Run a button's action; show a refusal in the widget instead of losing it in a log."""

        def handler(_button: Any) -> None:
            try:
                action()
            except KubelabError as exc:
                self.panel.value = f"<pre style='color:#cf222e'>{html.escape(exc.message())}</pre>"

        return handler


class ExperimentWidget(LiveWidget):
    """Status, elapsed time, replicas, the timeline of a preempted or resized run, latest metrics
    with sparklines, Stop/Logs/TensorBoard."""

    def __init__(self, service: Any, record: dict[str, Any]) -> None:
        self.service = service
        self.record = dict(record)
        self.points: list[dict[str, Any]] = []
        self.tensorboard_pending = False
        self.pending_lock = threading.Lock()
        self.header = w.HTML()
        self.timeline = w.HTML()
        self.spans: list[dict[str, Any]] = []  # the record's `timeline`, read whole
        self.spans_of: tuple[Any, ...] = ()  # the state, reason and size they were read at
        self.metrics = w.HTML()
        self.system = w.HTML()
        self.system_read_at = -SYSTEM_EVERY
        self.panel = w.HTML()
        self.stop_button = w.Button(description="Stop", icon="stop", button_style="danger")
        self.logs_button = w.Button(description="Logs", icon="align-left")
        self.tb_button = w.Button(description="TensorBoard", icon="line-chart")
        self.stop_button.on_click(self.guarded(self.stop))
        self.logs_button.on_click(self.guarded(self.show_logs))
        self.tb_button.on_click(self.guarded(self.show_tensorboard))
        buttons = w.HBox([self.stop_button, self.logs_button, self.tb_button])
        super().__init__([self.header, self.timeline, self.metrics, self.system, buttons, self.panel])
        self.render()

    @property
    def done(self) -> bool:  # type: ignore[override]
        return self.record["status"] in TERMINAL

    def summary(self) -> str:
        return views.experiment_text(self.record)

    def refresh(self) -> None:
        self.record.update(self.service.get(self.id))
        self.points = self.service.metrics(self.id)
        self.render()
        self.read_system()

    def read_timeline(self) -> None:
        """The Timeline line's spans, re-read when the run's state, reason or size changed (the
        event stream's records are summaries without them; new metrics alone do not ask)."""
        r = self.record
        now = (r.get("status"), r.get("reason"), r.get("restarts"), r.get("replicas"))
        if "timeline" not in r and now != self.spans_of:
            try:
                r.update(self.service.get(self.id))
            except (KubelabError, OSError):
                return  # kept as it was; the next change asks again
        if "timeline" in r:
            self.spans, self.spans_of = r.pop("timeline") or [], now
        self.timeline.value = views.timeline_html(self.spans)

    def on_event(self, kind: str, data: Any) -> None:
        if kind == "connected":  # anything that happened before the stream opened
            self.refresh()
        elif kind == "experiment" and data.get("id") == self.id:
            self.record.update(data)
            self.read_timeline()
            self.render()
            if self.done:  # the samples up to its end
                self.read_system()
        elif kind == "metrics" and data.get("id") == self.id:
            self.points.extend(data.get("points") or [])
            self.render()
        else:
            return
        self.open_pending_tensorboard()

    def tick(self) -> None:
        if self.record.get("started_at") and not self.done:
            self.render_header()
            if self.timeline.value:  # the open span grows with the clock
                self.timeline.value = views.timeline_html(self.spans)
            if time.monotonic() - self.system_read_at >= SYSTEM_EVERY:
                self.read_system()
        self.open_pending_tensorboard()

    def read_system(self) -> None:
        """The System line: each GPU's utilisation now and its sparkline (kept as it was when
        the server cannot be read this once)."""
        self.system_read_at = time.monotonic()
        try:
            read = self.service.system(self.id, SYSTEM_POINTS)
        except (KubelabError, OSError):
            return
        self.system.value = views.system_html(read)

    def render_header(self) -> None:
        r = self.record
        replicas = f" · {r.get('replicas', 1)} replicas" if r.get("replicas", 1) > 1 else ""
        gpus = (r.get("resources") or {}).get("gpus") or 0
        reason = f" <span style='color:#6e7781'>{html.escape(r.get('reason') or '')}</span>"
        self.header.value = (
            f"<b>{html.escape(r['name'])}</b> <code>{r['id']}</code> {views.badge(r['status'])}"
            f" ⏱ {views.elapsed(r)}{replicas}{f' · {gpus} GPU' if gpus else ''}{reason}"
        )

    def render(self) -> None:
        self.render_header()
        if "timeline" in self.record:  # a record read whole (the first one, a refresh)
            self.read_timeline()
        latest = self.record.get("metrics") or {}
        charts = views.series(self.points)
        cells: list[Any] = []
        for name in list(dict.fromkeys([*charts, *latest]))[:4]:
            history: list[Any] = charts.get(name) or [""]
            value = latest.get(name, history[-1])
            cells.append(
                f"<div style='display:inline-block;margin-right:16px'>"
                f"<div>{html.escape(name)} = <b>{html.escape(views.short(value))}</b></div>"
                f"{views.sparkline(charts.get(name, []))}</div>"
            )
        step = self.record.get("step")
        self.metrics.value = (f"<div>{''.join(cells)}</div>" if cells else "") + (
            f"<small>step {step}</small>" if step is not None else ""
        )
        self.stop_button.disabled = self.done

    def stop(self) -> None:
        self.record.update(self.service.stop(self.id))
        self.render()

    def show_logs(self) -> None:
        # The state before the logs: a run that had ended then has all its output on disk.
        ended = self.service.get(self.id)["status"] in TERMINAL
        text = "".join(self.service.logs(self.id))
        tail = "\n".join(text.splitlines()[-200:])
        empty = "(no output: the run printed nothing)" if ended else "(no output yet)"
        self.panel.value = f"<pre style='max-height:300px;overflow:auto'>{html.escape(tail) or empty}</pre>"

    def show_tensorboard(self) -> None:
        session = self.service.tensorboard({"experiments": [self.id]})
        self.panel.value = views.tensorboard_html(session, session["url"])

    def tensorboard_when_reported(self) -> None:
        """`%%train --tensorboard`: open TensorBoard once the run has event files with its
        reported metrics. Opened earlier, TensorBoard's page says "No dashboards are active"
        and stays so until reloaded by hand."""
        self.tensorboard_pending = True
        self.panel.value = (
            "<small data-kubelab-tensorboard-pending>TensorBoard opens here when the "
            "run reports its first metric.</small>"
        )
        self.open_pending_tensorboard()

    def open_pending_tensorboard(self) -> None:
        with self.pending_lock:  # the event and tick threads both ask
            if not self.tensorboard_pending:
                return
            reported = bool(self.points or self.record.get("metrics"))
            opening = reported and (self.done or self.has_event_files())
            if opening or self.done:
                self.tensorboard_pending = False
        if opening:
            self.guarded(self.show_tensorboard)(None)
        elif self.done:
            self.panel.value = (
                "<small>The run ended without reporting a metric; the TensorBoard "
                "button shows the event files its code wrote itself.</small>"
            )

    def has_event_files(self) -> bool:
        """Whether the run's TensorBoard folder (kubelab's mirror or the user's own writer) holds
        an event file yet; False where this kernel cannot see the run directory."""
        if "run_dir" not in self.record:
            self.record.update(self.service.get(self.id))
        folder = RunDirectory(Path(self.record.get("run_dir") or "/nonexistent")).tensorboard_dir
        pattern = "events.out.tfevents*"
        return any(folder.glob(pattern)) or any(folder.glob(f"*/{pattern}"))


class SweepWidget(LiveWidget):
    """Progress (finished/max), the best trial so far, and a live trials table."""

    def __init__(self, service: Any, record: dict[str, Any]) -> None:
        self.service = service
        self.record = dict(record)
        self.trials: dict[str, dict[str, Any]] = {t["id"]: t for t in record.get("trials") or []}
        self.header = w.HTML()
        self.progress = w.IntProgress(min=0, max=max(1, record.get("max_trials") or 1))
        self.best = w.HTML()
        self.table = w.HTML()
        self.panel = w.HTML()
        self.stop_button = w.Button(description="Stop sweep", icon="stop", button_style="danger")
        self.tb_button = w.Button(description="TensorBoard", icon="line-chart")
        self.stop_button.on_click(self.guarded(self.stop))
        self.tb_button.on_click(self.guarded(self.show_tensorboard))
        super().__init__(
            [
                self.header,
                self.progress,
                self.best,
                w.HBox([self.stop_button, self.tb_button]),
                self.table,
                self.panel,
            ]
        )
        self.render()

    @property
    def done(self) -> bool:  # type: ignore[override]
        return self.record.get("status") in SWEEP_DONE

    def summary(self) -> str:
        return views.sweep_text(self.record)

    def refresh(self) -> None:
        record = self.service.sweep(self.id)
        self.record.update(record)
        self.trials.update({t["id"]: t for t in record.get("trials") or []})
        self.render()

    def on_event(self, kind: str, data: Any) -> None:
        if kind == "connected":
            self.refresh()
        elif kind == "sweep" and data.get("id") == self.id:
            self.record.update(data)
            self.trials.update({t["id"]: t for t in data.get("trials") or []})
            self.render()
        elif kind == "experiment" and data.get("sweep") == self.id:
            self.trials[data["id"]] = {**self.trials.get(data["id"], {}), **data}
            self.render()

    def render(self) -> None:
        finished, most = views.sweep_progress(self.record)
        self.progress.max = max(1, most or len(self.trials) or 1)
        self.progress.value = min(finished, self.progress.max)
        self.progress.description = f"{finished}/{most if most is not None else '?'}"
        status = self.record.get("status") or PENDING
        self.header.value = (
            f"<b>sweep {html.escape(self.record.get('name') or '')}</b> "
            f"<code>{self.id}</code> {views.badge(status)}"
        )
        self.best.value = html.escape(views.best_text(self.record))
        metric = (self.record.get("objective") or {}).get("metric", "default")
        self.table.value = views.trials_html(list(self.trials.values()), metric)
        self.stop_button.disabled = self.done

    def stop(self) -> None:
        self.record.update(self.service.stop_sweep(self.id))
        self.render()

    def show_tensorboard(self) -> None:
        session = self.service.tensorboard({"sweep": self.id})
        self.panel.value = views.tensorboard_html(session, session["url"])


def widgets_available(shell: Any) -> bool:
    """A kernel that talks to a frontend (not a terminal IPython) can show widgets."""
    import os

    choice = os.environ.get("KUBELAB_WIDGETS", "").lower()
    if choice in ("0", "false", "no", "text"):
        return False
    if choice in ("1", "true", "yes"):
        return True
    return type(shell).__name__ == "ZMQInteractiveShell" and getattr(shell, "kernel", None) is not None
