"""docs/pipelines.md's worked example, run as written on the local backend through the CLI:
a sweep, a longer training of its best parameters, an evaluation of the saved model, and
the nightly schedule it describes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipelines.md"


def doc_files() -> dict[str, str]:
    """`<!-- file: NAME -->` followed by a fenced block: the files the page tells you to write."""
    found = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", DOC.read_text(), re.S)
    return dict(found)


def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.cli", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )


def test_the_worked_example_runs_as_documented(pipeline_env: Path) -> None:
    files = doc_files()
    assert set(files) == {"tune.py", "train.py", "evaluate.py", "nightly.yml"}
    for name, text in files.items():
        (pipeline_env / name).write_text(text)
    ran = kubelab(
        "pipeline", "run", "-f", "nightly.yml", "--now", "--wait", "-P", "long_epochs=5", "-o", "json"
    )
    assert ran.returncode == 0, ran.stderr + ran.stdout
    record = json.loads(ran.stdout)
    assert record["status"] == "Succeeded" and record["params"] == {"long_epochs": 5}
    tune, train, evaluate = record["steps"]
    assert tune["record"]["best"]["params"] == {"lr": 0.03} and tune["record"]["counts"]["succeeded"] == 3
    assert train["record"]["params"] == {"lr": 0.03, "epochs": 5}
    assert evaluate["record"]["metrics"] == {"test_accuracy": 0.99, "epochs": 5}
    shown = kubelab("pipeline", "show", record["id"])
    assert shown.returncode == 0 and "evaluate" in shown.stdout and "succeeded" in shown.stdout
    listed = kubelab("ls", f"pipeline:{record['id']}, step:train", "-o", "json")
    assert [r["id"] for r in json.loads(listed.stdout)["items"]] == [train["id"]]

    scheduled = kubelab("pipeline", "run", "-f", "nightly.yml", "-o", "json")  # the spec has a schedule
    assert scheduled.returncode == 0, scheduled.stderr
    schedule = json.loads(scheduled.stdout)
    assert (schedule["cron"], schedule["timezone"], schedule["concurrency"]) == (
        "0 2 * * *",
        "Europe/Berlin",
        "forbid",
    )
    assert schedule["next_at"][11:16] in ("00:00", "01:00")  # 02:00 in Berlin, CEST or CET, in UTC
    assert kubelab("schedule", "rm", schedule["id"]).returncode == 0


def test_cli_refusals_name_the_field(pipeline_env: Path) -> None:
    (pipeline_env / "cycle.yml").write_text(
        json.dumps(
            {
                "steps": [
                    {"name": "a", "depends_on": ["b"], "experiment": {"command": "true"}},
                    {"name": "b", "depends_on": ["a"], "experiment": {"command": "true"}},
                ]
            }
        )
    )
    refused = kubelab("pipeline", "run", "-f", "cycle.yml")
    assert refused.returncode == 2 and "steps.a.depends_on: makes a cycle: a -> b -> a" in refused.stderr
    (pipeline_env / "bad-cron.yml").write_text(
        json.dumps(
            {"steps": [{"name": "a", "experiment": {"command": "true"}}], "schedule": {"cron": "nightly"}}
        )
    )
    for args in (
        ["pipeline", "run", "-f", "bad-cron.yml"],
        ["pipeline", "run", "-f", "bad-cron.yml", "--now"],
        ["schedule", "add", "-f", "bad-cron.yml"],
    ):
        refused = kubelab(*args)
        assert refused.returncode == 2 and "schedule.cron: 'nightly' is not a valid cron" in refused.stderr, (
            args
        )
    assert kubelab("pipeline", "show", "0123456789ab").returncode == 2
    assert json.loads(kubelab("pipeline", "ls", "-o", "json").stdout) == {"items": []}
    assert json.loads(kubelab("schedule", "ls", "-o", "json").stdout) == {"items": []}
