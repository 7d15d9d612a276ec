"""The CLI on long work and for people: `--wait` progress (a live line on a terminal, plain lines in a
pipe), `kubelab ls` limits and parameter columns, `kubelab show`'s layout, natural name order and
escaped control characters, in real subprocesses (a real pseudo-terminal for the live line)."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from driver_support import stop_leftovers

from kubelab.progress import LiveStatus, format_duration, sweep_line
from kubelab.records import SUCCEEDED, RunDirectory, Status

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def drivers(lab_env: Path) -> Any:
    yield lab_env
    stop_leftovers(lab_env / "home")


def in_terminal(args: list[str], cwd: Path, timeout: float = 120) -> tuple[int, str]:
    """Run the CLI with stdout and stderr on a real pseudo-terminal; (exit code, what it drew)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "kubelab.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "160"},
    )
    os.close(follower)
    drawn = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: every writer is gone
                break
            if not data:
                break
            drawn += data
        elif process.poll() is not None:
            break
    os.close(leader)
    return process.wait(timeout=30), drawn.decode(errors="replace")


def sweep_file(folder: Path, trials: int = 3) -> str:
    spec = {
        "name": "progress",
        "space": {"x": {"_type": "choice", "_value": list(range(trials))}},
        "tuner": "grid",
        "max_trials": trials,
        "objective": {"metric": "loss", "direction": "minimize"},
        "concurrency": 2,
        "trial": {"command": "python -c 'import kubelab; kubelab.report(loss={{ x }})'"},
    }
    (folder / "sweep.yml").write_text(yaml.safe_dump(spec))
    return "sweep.yml"


def test_sweep_wait_in_a_pipe_prints_plain_progress_lines(cli: Cli, drivers: Path) -> None:
    done = cli("sweep", "-f", sweep_file(drivers), "--wait")
    assert "\x1b" not in done.stderr  # no cursor movement or colour in a file
    lines = [line for line in done.stderr.splitlines() if "trials done" in line]
    assert lines and "3/3 trials done, 0 running, best loss=0 (#" in lines[-1]
    assert "elapsed" in lines[-1] and "ETA 0s" in lines[-1]
    assert any(": complete 2 x=2" in line for line in done.stderr.splitlines())
    assert "best: trial" in done.stdout and "loss=0 x=0" in done.stdout  # no Python dict


def test_sweep_wait_on_a_terminal_draws_a_live_line(drivers: Path) -> None:
    code, drawn = in_terminal(["sweep", "-f", sweep_file(drivers), "--wait"], drivers)
    assert code == 0, drawn
    assert "trials done" in drawn and "best loss=" in drawn and "ETA" in drawn
    assert "\x1b[" in drawn  # rich redraws the line in place
    assert "best: trial" in drawn


def test_run_wait_streams_output_and_shows_its_state_in_a_pipe(cli: Cli) -> None:
    script = (
        "import kubelab\nfor s in range(3):\n    kubelab.report(step=s, loss=1/(s+1))\nprint('trained')\n"
    )
    done = cli("run", "--wait", "--", "python", "-c", script)
    assert "trained" in done.stdout
    states = [line for line in done.stderr.splitlines() if "elapsed" in line]
    assert states and "Succeeded" in states[-1] or "Succeeded: exited 0" in done.stderr
    assert "\x1b" not in done.stderr


def test_pipeline_wait_shows_each_steps_state(cli: Cli, drivers: Path) -> None:
    pipeline = {
        "name": "two",
        "steps": [
            {"name": "first", "experiment": {"command": ["python", "-c", "pass"]}},
            {"name": "second", "depends_on": ["first"], "experiment": {"command": ["python", "-c", "pass"]}},
        ],
    }
    (drivers / "pipeline.yml").write_text(yaml.safe_dump(pipeline))
    done = cli("pipeline", "run", "-f", "pipeline.yml", "--wait")
    lines = [line for line in done.stderr.splitlines() if line.startswith("pipeline ") and ": first " in line]
    assert lines, done.stderr
    assert "first " in lines[-1] and "second " in lines[-1] and "waiting" not in lines[-1]


def test_sweep_line_estimates_what_is_left() -> None:
    class Entry:
        def __init__(self, number: int, final: bool, value: float | None) -> None:
            self.number, self.final, self.value = number, final, value

    entries = [Entry(0, True, 0.5), Entry(1, True, 0.2), Entry(2, False, None)]
    text, key = sweep_line("s1", entries, 10, 60.0, "loss", "minimize")
    assert text == "sweep s1: 2/10 trials done, 1 running, best loss=0.2 (#1), elapsed 1m00s, ETA 4m00s"
    assert key == (2, 1, 1)
    text, _ = sweep_line("s1", entries, None, 5.0, "acc", "maximize")
    assert "2 trials done" in text and "best acc=0.5 (#0)" in text and "ETA" not in text
    assert [format_duration(s) for s in (None, 5, 75, 7300)] == ["-", "5s", "1m15s", "2h01m"]


def test_plain_lines_print_on_a_new_state_and_escape_names(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("w") as handle, LiveStatus(file=handle) as live:
        live.update("a \x1b[2J", ("Running",), (1,))
        live.update("a again", ("Running",), (1,))  # nothing new: no line
        live.update("b", ("Succeeded",), (2,))
        live.log("trial \u202eevil")
    assert out.read_text() == "a \\x1b[2J\nb\ntrial \\u202eevil\n"


def make_runs(lab_env: Path, names: list[str]) -> list[str]:
    runs = lab_env / "home" / "runs"
    ids = []
    for index, name in enumerate(names):
        status = Status(state=SUCCEEDED, reason="exited 0", exit_code=0)
        spec = {"name": name, "command": ["true"], "params": {"lr": index / 100, "batch": 32}}
        ids.append(RunDirectory.create(runs, spec, status).id)
    return ids


def test_ls_shows_the_newest_fifty_unless_asked_and_parameter_columns(cli: Cli, lab_env: Path) -> None:
    ids = make_runs(lab_env, [f"run-{i}" for i in range(55)])
    table = cli("ls").stdout.splitlines()
    assert len(table) == 1 + 50 + 1 and "(50 of 55 shown" in table[-1]
    assert table[1].split()[0] == max(ids)  # the newest first
    assert len(cli("ls", "--all").stdout.splitlines()) == 1 + 55
    assert len(cli("ls", "--limit", "3").stdout.splitlines()) == 1 + 3 + 1
    wide = cli("ls", "--params", "lr,batch", "--limit", "2", "--sort", "name").stdout.splitlines()
    assert wide[0].split()[5:7] == ["LR", "BATCH"]
    at = wide[0].index("LR")
    assert wide[1].split()[1] == "run-0" and wide[1][at:].split()[:2] == ["0", "32"]
    assert wide[2].split()[1] == "run-1"
    ordered = [line.split()[1] for line in cli("ls", "--all", "--sort", "name").stdout.splitlines()[1:]]
    assert ordered[:12] == [f"run-{i}" for i in range(12)]  # run-2 before run-10


def test_show_lays_the_record_out_without_python_reprs_and_escapes_names(cli: Cli, lab_env: Path) -> None:
    (run_id,) = make_runs(lab_env, ["evil\x1b]0;title\x07\u202ename"])
    shown = cli("show", run_id).stdout
    assert "{'" not in shown and "[]" not in shown
    assert "lr" in shown and "batch  32" in shown and "Parameters" in shown
    assert "\x1b" not in shown and "\u202e" not in shown and "\\x1b]0;title\\x07\\u202ename" in shown
    assert "\\x1b" in cli("ls").stdout and "\x1b" not in cli("ls").stdout
    assert json.loads(cli("show", run_id, "-o", "json").stdout)["name"].startswith("evil\x1b")
    assert 'name: "evil' in cli("show", run_id, "-o", "yaml").stdout


def test_a_missing_script_fails_with_pythons_own_reason(cli: Cli) -> None:
    failed = cli("run", "--wait", "--", "python", "no_such_script.py", check_rc=1)
    final = failed.stderr.strip().splitlines()[-1]
    assert "Failed: replica 0 exited with code 2: " in final
    assert "can't open file" in final and "no_such_script.py" in final
    reason = json.loads(cli("ls", "-o", "json").stdout)["items"][0]["reason"]
    assert reason == final.split(" Failed: ", 1)[1]
