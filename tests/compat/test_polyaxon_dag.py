"""Polyaxon v1 DAGs run as kubelab pipelines and their `schedule:` sections become kubelab
schedules; what has no faithful equivalent (interval schedules, triggers, ...) is refused by
name. Fixtures written from Polyaxon's flow-engine and schedules documentation."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubelab.errors import ValidationError
from kubelab.formats.polyaxon_dag import pipeline, schedule, translate
from kubelab.formats.specfile import load_document
from kubelab.schedules.spec import parse_schedule

POLYAXON = Path(__file__).parent / "fixtures" / "polyaxon"


def refusal(call: Callable[[], object]) -> dict[str, str]:
    with pytest.raises(ValidationError) as refused:
        call()
    return {f.path: f.reason for f in refused.value.fields}


def dag() -> dict[str, Any]:
    document: dict[str, Any] = load_document(POLYAXON / "v1_dag.yml")
    return document


def test_a_dag_is_a_pipeline_with_its_references_as_templates() -> None:
    spec = pipeline(dag(), POLYAXON)
    assert spec["name"] == "nightly-dag" and spec["params"] == {"epochs": 4}  # the operation's value
    assert spec["schedule"] == {
        "cron": "0 3 * * *",
        "timezone": "UTC",
        "concurrency": "allow",
        "start": "2026-01-01T00:00:00Z",
        "end": "2030-01-01T00:00:00Z",
    }
    steps = {s["name"]: s for s in spec["steps"]}
    assert list(steps) == ["prepare", "tune", "train", "evaluate"]
    assert steps["prepare"]["experiment"]["command"] == ["python3", "-c", "print('data ready')"]
    assert steps["tune"]["depends_on"] == ["prepare"] and "sweep" in steps["tune"]
    assert steps["tune"]["outputs"] == ["lr"]  # what train reads from it
    assert steps["train"]["experiment"]["params"] == {
        "lr": "{{ steps.tune.best.metrics.lr }}",
        "epochs": "{{ params.epochs }}",
    }
    assert steps["evaluate"]["experiment"]["params"] == {"accuracy": "{{ steps.train.metrics.accuracy }}"}
    assert steps["evaluate"]["depends_on"] == ["train"] and steps["train"]["outputs"] == ["accuracy"]


def test_the_dag_runs_as_a_pipeline_and_its_schedule_is_added(
    cli: Callable[..., subprocess.CompletedProcess[str]], compat_env: Path
) -> None:
    done = cli("pipeline", "run", "-f", "polyaxon/v1_dag.yml", "--now", "--wait", "-o", "json")
    record = json.loads(done.stdout)
    assert record["status"] == "Succeeded", record
    steps = {s["name"]: s for s in record["steps"]}
    assert steps["tune"]["record"]["best"]["params"] == {"lr": 0.03}
    assert steps["train"]["record"]["params"] == {"lr": 0.03, "epochs": 4}
    assert steps["evaluate"]["record"]["metrics"]["test_accuracy"] == pytest.approx(1 - 0.0025 - 0.01)
    added = json.loads(cli("schedule", "add", "-f", "polyaxon/v1_dag.yml", "-o", "json").stdout)
    assert (added["kind"], added["cron"], added["end"]) == ("pipeline", "0 3 * * *", "2030-01-01T00:00:00Z")
    cli("schedule", "rm", added["id"])


def test_a_scheduled_operation_is_a_schedule_of_its_experiment() -> None:
    op = {**load_document(POLYAXON / "v1_operation.yml"), "schedule": {"kind": "cron", "cron": "*/5 * * * *"}}
    mapped = translate(op, POLYAXON)
    assert mapped["schedule"]["cron"] == "*/5 * * * *" and mapped["command"][0] == "python3"
    once = translate({**op, "schedule": {"kind": "datetime", "startAt": "2027-03-04T05:06:00Z"}}, POLYAXON)
    when, problems = parse_schedule(once["schedule"])
    assert not problems and when is not None
    first = when.next_after(0)
    assert first is not None
    fires = [first]
    assert when.next_after(fires[0]) is None  # exactly one fire, at that minute
    assert fires[0] == when.start and when.to_dict()["start"] == "2027-03-04T05:06:00Z"
    assert (
        translate({"version": 1.1, "kind": "component", "run": {"kind": "job"}}, POLYAXON)["kind"]
        == "component"
    )


@pytest.mark.parametrize(
    ("section", "path", "reason"),
    [
        (
            {"kind": "interval", "frequency": 3600, "startAt": "2026-01-01T00:00:00Z"},
            "schedule.kind",
            "no cron form",
        ),
        ({"kind": "cron", "cron": "0 * * * *", "maxRuns": 3}, "schedule.maxRuns", "give endAt instead"),
        (
            {"kind": "cron", "cron": "0 * * * *", "dependsOnPast": True},
            "schedule.dependsOnPast",
            "does not wait",
        ),
        ({"kind": "datetime", "startAt": "2027-03-04T05:06:07Z"}, "schedule.startAt", "whole minutes"),
        ({"kind": "datetime"}, "schedule.startAt", "is required"),
        ({"kind": "cronn", "cron": "0 * * * *"}, "schedule.kind", "did you mean 'cron'"),
    ],
)
def test_schedules_without_a_faithful_mapping_are_refused_by_name(
    section: dict[str, Any], path: str, reason: str
) -> None:
    assert reason in refusal(lambda: schedule(section)).get(path, ""), refusal(lambda: schedule(section))


def test_a_bad_cron_string_is_refused_naming_the_field_and_nothing_is_recorded(compat_env: Path) -> None:
    from kubelab.experiments import Experiments
    from kubelab.schedules.service import Schedules

    data = dag()
    data["schedule"]["cron"] = "61 * * * *"
    schedules = Schedules(Experiments())
    with pytest.raises(ValidationError) as refused:
        schedules.create(None, data, base_dir=POLYAXON, start_scheduler=False)
    assert [f.path for f in refused.value.fields] == ["schedule.cron"]
    assert schedules.list() == []


@pytest.mark.parametrize(
    ("change", "path", "reason"),
    [
        (lambda ops: ops[1].update(trigger="all_done"), "operations[1].trigger", "all_succeeded"),
        (lambda ops: ops[1].update(conditions="{{ x }}"), "operations[1].conditions", "not supported"),
        (
            lambda ops: ops[0].update(dagRef="prepare-dta"),
            "operations[0].dagRef",
            "did you mean 'prepare-data'",
        ),
        (lambda ops: ops[0].update(dagRef=None, hubRef="x"), "operations[0].hubRef", "Polyaxon Hub"),
        (
            lambda ops: ops[2]["params"]["lr"].update(ref="ops.tun"),
            "operations[2].params.lr.ref",
            "no operation named 'tun'",
        ),
        (
            lambda ops: ops[2]["params"]["lr"].update(ref="runs.abc"),
            "operations[2].params.lr.ref",
            "Polyaxon's API",
        ),
    ],
)
def test_what_a_pipeline_cannot_express_is_refused_by_operation(
    change: Callable[[list[dict[str, Any]]], object], path: str, reason: str
) -> None:
    data = copy.deepcopy(dag())
    change(data["component"]["run"]["operations"])
    found = refusal(lambda: pipeline(data, POLYAXON))
    assert reason in found.get(f"component.run.{path}", ""), found


def test_dag_level_settings_without_an_equivalent_are_refused() -> None:
    data = dag()
    data["component"]["run"]["concurrency"] = 2
    data["matrix"] = {"kind": "grid", "params": {}}
    found = refusal(lambda: pipeline(data, POLYAXON))
    assert "no cap" in found["component.run.concurrency"] and "many pipelines" in found["matrix"]
