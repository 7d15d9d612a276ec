"""What `--wait` shows while long work runs: one live status line on a terminal (rich), plain
lines when the output is a file or a pipe (a CI log gets a line when something changed, not a
redraw every tick).

The status line of a sweep says trials done of the budget, running, the best value so far, the
time spent and an estimate of what is left; a pipeline's, each step's state; a run's, its state
and last metrics. Lines that stay (a trial's end, a step's change) print above the live line.
Every text passes through `clean`.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from kubelab.cli_output import clean, say
from kubelab.records import TERMINAL


def format_duration(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "-"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def sweep_line(
    sweep_id: str,
    entries: list[Any],
    max_trials: int | None,
    elapsed: float,
    metric: str,
    direction: str,
) -> tuple[str, tuple[Any, ...]]:
    """(the status text, what changes it other than the clock) for a sweep's trials."""
    done = [e for e in entries if e.final]
    running = sum(1 for e in entries if not e.final)
    values = [e for e in done if e.value is not None]
    best = (min if direction == "minimize" else max)(values, key=lambda e: e.value) if values else None
    total = f"/{max_trials}" if max_trials else ""
    eta = None
    if max_trials and done:
        eta = elapsed / len(done) * max(0, max_trials - len(done))
    best_text = f"best {metric}={best.value:.6g} (#{best.number})" if best else "best: none yet"
    text = (
        f"sweep {sweep_id}: {len(done)}{total} trials done, {running} running, {best_text}, "
        f"elapsed {format_duration(elapsed)}" + (f", ETA {format_duration(eta)}" if eta is not None else "")
    )
    return text, (len(done), running, best.number if best else None)


def pipeline_line(pipeline_id: str, steps: list[dict[str, Any]]) -> tuple[str, tuple[Any, ...]]:
    states = [(s["name"], s["state"]) for s in steps]
    return f"pipeline {pipeline_id}: " + ", ".join(f"{n} {s}" for n, s in states), tuple(states)


def run_line(record: dict[str, Any], elapsed: float) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    """(text, key: its state, detail: its step and last metrics) for one run."""
    metrics = list((record.get("metrics") or {}).items())[:4]
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics)
    step = f" step {record['step']}" if record.get("step") is not None else ""
    text = f"{record['id']} {record['status']}{step}" + (f" {shown}" if shown else "")
    return f"{text}, elapsed {format_duration(elapsed)}", (record["status"],), (record.get("step"), shown)


def follow_run(lab: Any, run_id: str, show: bool) -> dict[str, Any]:
    """`kubelab run --wait`: the run's output on stdout as it comes, its status line on stderr;
    returns the final record."""
    started = time.monotonic()
    looked = 0.0
    with LiveStatus(enabled=show) as live:
        chunks = lab.logs(run_id, 0, follow=True, idle=True) if show else iter(())
        for chunk in chunks:
            if chunk:
                sys.stdout.write(chunk)
                sys.stdout.flush()
            else:
                time.sleep(0.05)
            if time.monotonic() - looked >= 0.25:
                looked = time.monotonic()
                live.update(*run_line(lab.get(run_id), looked - started))
        while (record := lab.get(run_id))["status"] not in TERMINAL:
            live.update(*run_line(record, time.monotonic() - started))
            time.sleep(0.2)
    return dict(record)


PLAIN_EVERY = 10.0  # seconds between plain lines that only a detail (a metric) changed


class LiveStatus:
    """A status line redrawn in place on a terminal. Otherwise printed as a line when its `key`
    changes (a state, a trial's end), or when only its `detail` did, every PLAIN_EVERY seconds."""

    def __init__(self, file: IO[str] | None = None, enabled: bool = True) -> None:
        self.file = file or sys.stderr
        self.enabled = enabled
        self.live: Any = None
        self.last_key: tuple[Any, ...] | None = None
        self.last_detail: tuple[Any, ...] | None = None
        self.printed_at = 0.0
        if enabled and self.file.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(
                console=Console(file=self.file, highlight=False), refresh_per_second=4, transient=True
            )
            self.live.start()

    def update(self, text: str, key: tuple[Any, ...], detail: tuple[Any, ...] = ()) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            from rich.text import Text

            self.live.update(Text(clean(text)))
            return
        now = time.monotonic()
        if key != self.last_key or (detail != self.last_detail and now - self.printed_at >= PLAIN_EVERY):
            say(text, file=self.file, flush=True)
            self.last_key, self.last_detail, self.printed_at = key, detail, now

    def log(self, text: str) -> None:
        """A line that stays (above the live line on a terminal)."""
        if not self.enabled:
            return
        if self.live is not None:
            from rich.text import Text

            self.live.console.print(Text("\n".join(clean(line) for line in text.split("\n"))))
        else:
            say(text, file=self.file, flush=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def __enter__(self) -> LiveStatus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
