"""Schedules on one machine: validation, the fires a clock makes due (catch-up per
concurrency, with an injected clock), and the real per-user scheduler process firing a
pipeline every second, surviving its starter and a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from pipeline_support import write_script

from kubelab.errors import Conflict, ValidationError
from kubelab.experiments import Experiments
from kubelab.schedules.scheduler import Scheduler, due
from kubelab.schedules.service import Schedules
from kubelab.schedules.spec import parse_schedule

DAY = 86400.0


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def test_fire_times_follow_cron_time_zone_and_bounds() -> None:
    schedule, errors = parse_schedule(
        {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "end": "2026-03-03T00:00:00Z"}
    )
    assert not errors
    fires = due(schedule, at("2026-03-01T00:00:00"), at("2026-03-10T00:00:00"))
    assert fires == [at("2026-03-01T01:00:00"), at("2026-03-02T01:00:00")]  # 02:00 CET, then the end
    assert due(schedule, at("2026-02-01T00:00:00"), at("2026-03-10T00:00:00"), limit=2) == fires  # latest
    started, _ = parse_schedule({"cron": "0 2 * * *", "start": "2026-03-02T00:00:00Z"})
    assert due(started, at("2026-02-01T00:00:00"), at("2026-03-03T12:00:00")) == [
        at("2026-03-02T02:00:00"),
        at("2026-03-03T02:00:00"),
    ]
    every_second, _ = parse_schedule({"cron": "* * * * * *"})
    week = due(every_second, 0.0, at("2026-03-10T00:00:00"), limit=3)  # no walk through the missed
    assert week == [at("2026-03-09T23:59:58"), at("2026-03-09T23:59:59"), at("2026-03-10T00:00:00")]
    summer, _ = parse_schedule({"cron": "0 2 * * *", "timezone": "Europe/Berlin"})
    assert summer is not None
    assert summer.next_after(at("2026-07-01T12:00:00")) == at("2026-07-02T00:00:00")  # CEST


@pytest.mark.parametrize(
    ("data", "path", "reason"),
    [
        ({"cron": "0 25 * * *"}, "schedule.cron", "not a valid cron expression"),
        ({"cron": "0 2 * * *", "timezone": "../../etc/passwd"}, "schedule.timezone", "not an IANA time zone"),
        ({"cron": "0 2 * * *", "concurrency": "parallel"}, "schedule.concurrency", "must be one of"),
        (
            {"cron": "0 2 * * *", "start": "2026-02-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"},
            "schedule.end",
            "must be after start",
        ),
        ({"cron": "0 2 * * *", "every": "day"}, "schedule.every", "unknown field"),
        ({"timezone": "UTC"}, "schedule.cron", "is required"),
    ],
)
def test_bad_schedules_are_refused_and_nothing_is_created(
    pipeline_env: Path, data: dict[str, Any], path: str, reason: str
) -> None:
    schedules = Schedules(Experiments())
    with pytest.raises(ValidationError) as caught:
        schedules.create(None, {"command": ["true"], "schedule": data}, start_scheduler=False)
    assert any(f.path == path and reason in f.reason for f in caught.value.fields), caught.value.fields
    assert schedules.list() == []


def test_a_schedule_refuses_a_bad_spec_up_front(pipeline_env: Path) -> None:
    with pytest.raises(ValidationError) as caught:
        Schedules(Experiments()).create(
            None,
            {
                "steps": [{"name": "a", "depends_on": ["b"], "experiment": {"command": "x"}}],
                "schedule": "0 2 * * *",
            },
            start_scheduler=False,
        )
    assert [f.path for f in caught.value.fields] == ["steps.a.depends_on"]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def scheduled(pipeline_env: Path, concurrency: str, script: str = "pass") -> tuple[Scheduler, Clock, str]:
    write_script(pipeline_env, "job.py", script)
    lab = Experiments()
    record = Schedules(lab).create(
        None,
        {"command": ["python", "job.py"], "schedule": {"cron": "0 2 * * *", "concurrency": concurrency}},
        start_scheduler=False,
    )
    folder = Schedules(lab).get_dir(record["id"])
    state = folder.read_state()
    state["considered"] = at("2026-01-01T00:00:00")
    folder.write_state(state)
    clock = Clock(at("2026-01-01T00:00:00"))
    return Scheduler(lab.home, clock=clock), clock, record["id"]


def wait_ended(lab: Experiments, run_id: str) -> None:
    deadline = time.monotonic() + 60
    while not lab.run(run_id).status().terminal:
        assert time.monotonic() < deadline, lab.get(run_id)
        time.sleep(0.05)


def test_allow_catches_up_every_missed_fire(pipeline_env: Path) -> None:
    scheduler, clock, _ = scheduled(pipeline_env, "allow")
    assert scheduler.tick() == []  # nothing due yet
    clock.now += 3 * DAY  # three nights of downtime
    fires = scheduler.tick()
    assert [f["at"] for f in fires] == [
        "2026-01-01T02:00:00.000Z",
        "2026-01-02T02:00:00.000Z",
        "2026-01-03T02:00:00.000Z",
    ]
    assert all(f["state"] == "started" for f in fires)
    assert len(Experiments().list()[0]) == 3
    assert scheduler.tick() == []  # each fire once


def test_forbid_catches_up_once_and_skips_while_the_last_runs(pipeline_env: Path) -> None:
    scheduler, clock, schedule_id = scheduled(
        pipeline_env,
        "forbid",
        """
        import os, time
        while not os.path.exists("go"):
            time.sleep(0.05)
    """,
    )
    clock.now += 3 * DAY
    fires = scheduler.tick()
    assert [(f["at"], f["state"]) for f in fires] == [("2026-01-03T02:00:00.000Z", "started")]
    clock.now += DAY
    skipped = scheduler.tick()
    assert skipped[0]["state"] == "skipped" and fires[0]["id"] in skipped[0]["reason"]
    (pipeline_env / "go").touch()
    wait_ended(Experiments(), fires[0]["id"])
    clock.now += DAY
    assert scheduler.tick()[0]["state"] == "started"
    history = Schedules(Experiments()).list()[0]["fires"]
    assert [f["state"] for f in history] == ["started", "skipped", "started"]


def test_replace_stops_the_last_run_first(pipeline_env: Path) -> None:
    scheduler, clock, _ = scheduled(pipeline_env, "replace", "import time; time.sleep(600)")
    clock.now += DAY
    first = scheduler.tick()[0]
    clock.now += DAY
    second = scheduler.tick()[0]
    lab = Experiments()
    assert lab.run(first["id"]).status().state == "Stopped"
    assert second["state"] == "started" and not lab.run(second["id"]).status().terminal
    lab.stop(second["id"])


def test_paused_schedules_do_not_fire(pipeline_env: Path) -> None:
    scheduler, clock, schedule_id = scheduled(pipeline_env, "allow")
    schedules = Schedules(Experiments())
    schedules.pause(schedule_id)
    with pytest.raises(Conflict):
        schedules.pause(schedule_id)
    clock.now += 2 * DAY
    assert scheduler.tick() == []
    schedules.remove(schedule_id)
    assert schedules.list() == []


def kubelab(*args: str, env: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", *args],
        capture_output=True,
        text=True,
        env=env or os.environ.copy(),
        timeout=120,
    )


def wait_fires(schedules: Schedules, schedule_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        fires = [f for f in schedules.get_dir(schedule_id).read_state()["fires"] if f.get("id")]
        if len(fires) >= count:
            return fires
        time.sleep(0.1)
    raise AssertionError(schedules.get_dir(schedule_id).read_state())


def test_the_scheduler_process_fires_a_pipeline_and_comes_back_after_a_kill(pipeline_env: Path) -> None:
    (pipeline_env / "nightly.yml").write_text(
        json.dumps(
            {
                "name": "every-second",
                "steps": [{"name": "only", "experiment": {"command": ["python", "-c", "pass"]}}],
                "schedule": {
                    "cron": "* * * * * *",
                    "concurrency": "allow",
                },  # seconds: a test can wait for it
            }
        )
    )
    made = kubelab("pipeline", "run", "-f", "nightly.yml", "-o", "json")
    assert made.returncode == 0, made.stderr
    schedule_id = json.loads(made.stdout)["id"]
    schedules = Schedules(Experiments())
    fired = wait_fires(schedules, schedule_id, 1)  # the CLI has exited; its scheduler fires
    from kubelab.pipelines.service import Pipelines

    pipeline = Pipelines(Experiments()).pipeline(fired[0]["id"])
    assert pipeline.read_state().schedule == schedule_id
    pid = int((schedules.root / "scheduler.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # a reboot, or a culled server's session
    listed = kubelab("schedule", "ls", "-o", "json")  # whoever looks starts it again
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["items"][0]["id"] == schedule_id
    wait_fires(schedules, schedule_id, len(fired) + 2)
    assert int((schedules.root / "scheduler.pid").read_text()) != pid
    assert kubelab("schedule", "pause", schedule_id).returncode == 0
    assert kubelab("schedule", "rm", schedule_id).returncode == 0
    assert kubelab("schedule", "ls", "-o", "json").stdout.count(schedule_id) == 0


def test_run_and_sweep_send_a_scheduled_spec_to_schedule_add(pipeline_env: Path) -> None:
    (pipeline_env / "exp.json").write_text(json.dumps({"command": ["true"], "schedule": "30 1 * * 1"}))
    (pipeline_env / "sweep.json").write_text(
        json.dumps(
            {
                "space": {"x": {"_type": "choice", "_value": [1]}},
                "max_trials": 1,
                "trial": {"command": ["true"]},
                "schedule": {"cron": "0 3 * * *", "timezone": "Asia/Tokyo", "concurrency": "replace"},
            }
        )
    )
    refused = kubelab("run", "-f", "exp.json")
    assert refused.returncode == 2 and "schedule: a scheduled experiment is added with" in refused.stderr
    refused = kubelab("sweep", "-f", "sweep.json")
    assert refused.returncode == 2 and "schedule: a scheduled sweep is added with" in refused.stderr
    assert Experiments().list()[1] == 0 and not (Experiments().home / "sweeps").exists()
    for name, kind in (("exp.json", "experiment"), ("sweep.json", "sweep")):
        added = kubelab("schedule", "add", "-f", name, "-o", "json")
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout)["kind"] == kind
    listed = json.loads(kubelab("schedule", "ls", "-o", "json").stdout)["items"]
    assert {(s["kind"], s["timezone"], s["concurrency"]) for s in listed} == {
        ("experiment", "UTC", "forbid"),
        ("sweep", "Asia/Tokyo", "replace"),
    }
    for item in listed:
        assert kubelab("schedule", "rm", item["id"]).returncode == 0


def test_params_given_with_P_reach_the_schedule_and_the_pipeline(pipeline_env: Path) -> None:
    (pipeline_env / "nightly.yml").write_text(
        json.dumps(
            {
                "name": "with-params",
                "params": {"epochs": 1},
                "steps": [{"name": "only", "experiment": {"command": ["python", "-c", "pass"]}}],
                "schedule": "0 2 * * *",
            }
        )
    )
    added = kubelab("schedule", "add", "-f", "nightly.yml", "-P", "epochs=3", "-o", "json")
    assert added.returncode == 0, added.stderr
    schedule_id = json.loads(added.stdout)["id"]
    assert Schedules(Experiments()).get_dir(schedule_id).definition()["params"] == {"epochs": 3}
    refused = kubelab("schedule", "add", "-f", "nightly.yml", "-P", "epoch=3")
    assert refused.returncode == 2 and "params.epoch: is not a pipeline param" in refused.stderr
    refused = kubelab("schedule", "add", "-f", "nightly.yml", "-P", "epochs")
    assert refused.returncode == 2 and "param: must be NAME=VALUE, not 'epochs'" in refused.stderr
    assert [s["id"] for s in Schedules(Experiments()).list()] == [schedule_id]
    assert kubelab("schedule", "rm", schedule_id).returncode == 0

    ran = kubelab("pipeline", "run", "-f", "nightly.yml", "--now", "--wait", "-P", "epochs=3", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["params"] == {"epochs": 3}
    refused = kubelab("pipeline", "run", "-f", "nightly.yml", "--now", "-P", "=3")
    assert refused.returncode == 2 and "param: must be NAME=VALUE, not '=3'" in refused.stderr
