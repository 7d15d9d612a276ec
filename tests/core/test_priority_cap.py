"""The group's priority cap on the local backend: read from the environment the local hub
sets for each server, so the CLI, REST and sweeps/pipelines (all through `submit`) obey it."""

from __future__ import annotations

import pytest
from kubelab_testing import wait_until

from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.priorities import CAP_ENV, HIGH_PRIORITY, LOW_PRIORITY, NORMAL_PRIORITY, over_cap


@pytest.mark.fast
def test_over_cap_names_priority_and_the_cap() -> None:
    problem = over_cap(HIGH_PRIORITY, "normal")
    assert problem is not None and problem.path == "priority"
    assert "normal" in problem.reason and "high" in problem.reason
    assert over_cap(NORMAL_PRIORITY, "normal") is None
    assert over_cap(LOW_PRIORITY, "normal") is None
    assert over_cap(NORMAL_PRIORITY + 1, "normal") is not None  # a number above the cap too
    assert over_cap(HIGH_PRIORITY, None) is None  # no group cap: nothing to check


def test_capped_submit_is_refused_and_leaves_nothing(
    lab: Experiments, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAP_ENV, "normal")
    with pytest.raises(ValidationError) as refused:
        lab.submit({"command": "true", "priority": "high"})
    assert [f.path for f in refused.value.fields] == ["priority"]
    assert "normal" in refused.value.fields[0].reason
    assert lab.list()[1] == 0
    record = lab.submit({"command": "true", "priority": "normal"})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
