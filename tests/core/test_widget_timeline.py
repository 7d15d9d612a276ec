"""The widget under a `%%train` cell draws a preempted run's timeline: a real low-priority run
gives its GPU to a high one and resumes; the event stream's summaries (which carry no timeline)
make the widget read the spans again, and only when the run's state or reason changed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubelab_testing import wait_until

from kubelab.experiments import Experiments
from kubelab.magics import views
from kubelab.magics.widgets import ExperimentWidget


class Counting:
    """The lab as the widget's service, counting its whole-record reads."""

    def __init__(self, lab: Experiments) -> None:
        self.lab, self.gets = lab, 0

    def get(self, run_id: str) -> dict[str, Any]:
        self.gets += 1
        return self.lab.get(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lab, name)


def summary(lab: Experiments, run_id: str) -> dict[str, Any]:
    """The run as the event stream sends it: the index's summary, without history or timeline."""
    found = next(r for r in lab.list()[0] if r["id"] == run_id)
    assert "timeline" not in found
    return found


def test_the_widget_shows_a_preempted_runs_spans_and_latest_reason(
    lab: Experiments, lab_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBELAB_FAKE_GPUS", "1")
    low = lab.submit(
        {"name": "long", "command": ["sleep", "60"], "resources": {"gpus": 1}, "priority": "low"}
    )
    running = wait_until(lab, low["id"], states={"Running"})
    service = Counting(lab)
    widget = ExperimentWidget(service, running)
    assert widget.timeline.value == ""  # a run that only ran: nothing to draw

    high = lab.submit({"name": "deadline", "command": ["true"], "resources": {"gpus": 1}, "priority": "high"})
    deadline = time.monotonic() + 60
    while [s["state"] for s in lab.get(low["id"])["timeline"]][-2:] != ["Preempted", "Running"]:
        assert time.monotonic() < deadline, lab.get(low["id"])
        time.sleep(0.05)
    before = service.gets
    widget.on_event("experiment", summary(lab, low["id"]))
    assert service.gets == before + 1  # the state changed: the spans are read again
    shown = widget.timeline.value
    assert "Running → Preempted → Running (resumed)" in shown
    assert shown.count("data-state='Preempted'") == 1 and shown.count("data-state='Running'") == 2
    assert f"preempted for deadline ({high['id']}) (priority high)" in shown  # the Preempted span's
    assert widget.record["reason"] in shown  # the latest reason, under the strip

    widget.on_event("metrics", {"id": low["id"], "points": [{"step": 1, "metrics": {"loss": 1.0}}]})
    widget.on_event("experiment", summary(lab, low["id"]))
    assert service.gets == before + 1  # nothing changed: no read
    lab.stop(low["id"])
    wait_until(lab, low["id"])
    widget.on_event("experiment", summary(lab, low["id"]))
    assert service.gets == before + 2 and "Stopped" in widget.timeline.value


def test_the_strip_is_as_wide_as_the_spans_and_names_sizes() -> None:
    spans: list[dict[str, Any]] = [
        {
            "state": "Running",
            "reason": "<two>",
            "start": "2026-01-01T00:00:00.000Z",
            "seconds": 30.0,
            "resumed": False,
            "replicas": 2,
        },
        {
            "state": "Running",
            "reason": "shrunk",
            "start": "2026-01-01T00:00:30.000Z",
            "seconds": None,
            "resumed": False,
            "replicas": 1,
        },
    ]
    now = 1767225600.0 + 40  # ten seconds into the open span
    shown = views.timeline_html(spans, now)
    assert "width:75.00%" in shown and "width:25.00%" in shown
    assert "Running ×2 → Running ×1" in shown
    assert "&lt;two&gt;" in shown and "<two>" not in shown  # escaped, not markup
    plain = [{**span, "replicas": None} for span in spans]
    assert views.timeline_html(plain, now) == ""  # a fixed-size run that only ran
