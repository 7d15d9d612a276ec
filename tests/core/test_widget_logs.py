"""The widget under a `%train` cell: its Logs panel on a run that printed nothing says so once
the run has ended (it said "(no output yet)" on a finished run), with a real run."""

from __future__ import annotations

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
