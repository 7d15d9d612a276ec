"""What `kubelab schedule pause`/`resume` print: the state and the next fire in the schedule's own
time zone (it printed "next at None" for a paused schedule), in real subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo


def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_pause_and_resume_say_the_state_and_the_next_fire_in_its_time_zone(pipeline_env: Path) -> None:
    spec = {"command": ["true"], "schedule": {"cron": "30 9 * * *", "timezone": "Europe/Berlin"}}
    (pipeline_env / "daily.json").write_text(json.dumps(spec))
    schedule_id = json.loads(kubelab("schedule", "add", "-f", "daily.json", "-o", "json").stdout)["id"]
    try:
        paused = kubelab("schedule", "pause", schedule_id).stdout
        assert "None" not in paused
        assert (
            paused.strip()
            == f"schedule {schedule_id} paused: no fires until `kubelab schedule resume {schedule_id}`"
        )
        resumed = kubelab("schedule", "resume", schedule_id).stdout
        match = re.search(
            r"next at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (CES?T) \(Europe/Berlin; (\S+)\)", resumed
        )
        assert match, resumed
        assert match.group(1).endswith("09:30:00")  # the cron's hour where the schedule lives
        utc = datetime.strptime(match.group(3), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=ZoneInfo("UTC"))
        assert utc.astimezone(ZoneInfo("Europe/Berlin")).strftime("%Y-%m-%d %H:%M:%S") == match.group(1)
    finally:
        kubelab("schedule", "rm", schedule_id)
