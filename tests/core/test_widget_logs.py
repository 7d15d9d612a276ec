"""The widget under a `%train` cell: its Logs panel on a run that printed nothing says so once
the run has ended (it said "(no output yet)" on a finished run), with a real run."""

from __future__ import annotations

import json
import time

from kubelab.experiments import Experiments
from kubelab.magics.widgets import ExperimentWidget
from kubelab.records import TERMINAL


def wait(lab: Experiments, run_id: str, states: frozenset[str] | set[str]) -> None:
    deadline = time.monotonic() + 60
    while lab.get(run_id)["status"] not in states:
        assert time.monotonic() < deadline, lab.get(run_id)
        time.sleep(0.05)


def test_logs_of_a_silent_run_say_whether_more_can_come(lab: Experiments) -> None:
    finished = lab.submit({"command": ["true"]})  # the widget's record still says Pending
    wait(lab, finished["id"], TERMINAL)
    widget = ExperimentWidget(lab, finished)
    widget.show_logs()
    assert "(no output: the run printed nothing)" in widget.panel.value

    running = lab.submit({"command": ["sleep", "30"]})
    wait(lab, running["id"], {"Running"})
    widget = ExperimentWidget(lab, running)
    widget.show_logs()
    assert "(no output yet)" in widget.panel.value
    lab.stop(running["id"])


def test_the_widget_shows_each_gpus_utilisation_now_and_why_a_source_is_missing(lab: Experiments) -> None:
    finished = lab.submit({"command": ["true"]})
    wait(lab, finished["id"], TERMINAL)
    samples = [
        {"time": 100 + 5 * i, "gpus": [{"index": 0, "util": 80 + i}, {"index": 3, "util": 5}]}
        for i in range(8)
    ]
    recorded = lab.runs_root / finished["id"] / "recorded.jsonl"
    recorded.write_text(
        json.dumps({"sources": {"gpu": "nvml"}, "missing": {"process": "psutil <is> not installed"}})
        + "\n"
        + "".join(json.dumps(s) + "\n" for s in samples)
    )
    recorded.replace(recorded.with_name("system.jsonl"))
    widget = ExperimentWidget(lab, finished)
    assert widget.system.value == ""  # read when the run's state or the clock says so
    widget.on_event("experiment", lab.get(finished["id"]))
    shown = widget.system.value
    assert "GPU 0: <b>87%</b>" in shown and "GPU 3: <b>5%</b>" in shown
    assert shown.count("<svg") == 2  # a sparkline per GPU
    assert "no process metrics: psutil &lt;is&gt; not installed" in shown  # escaped, not markup

    silent = lab.submit({"command": ["true"]})  # nothing sampled: nothing drawn, nothing invented
    wait(lab, silent["id"], TERMINAL)
    (lab.runs_root / silent["id"] / "system.jsonl").unlink(missing_ok=True)
    widget = ExperimentWidget(lab, silent)
    widget.on_event("experiment", lab.get(silent["id"]))
    assert "GPU" not in widget.system.value
