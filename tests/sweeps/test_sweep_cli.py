"""`kubelab sweep` as users type it, in real subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml


@pytest.fixture
def cli(sweep_env: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, rc: int | None = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "kubelab.cli", "sweep", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            cwd=sweep_env,
            timeout=120,
        )
        if rc is not None:
            assert done.returncode == rc, done.stdout + done.stderr
        return done

    return run


def write_spec(folder: Path, **fields: Any) -> str:
    spec = {
        "name": "cli-sweep",
        "space": {"x": {"_type": "quniform", "_value": [0, 2, 1]}},
        "tuner": "grid",
        "objective": {"metric": "loss", "direction": "maximize"},
        "concurrency": 3,
        "trial": {"command": "python -c 'import kubelab; kubelab.report(loss={{ x }})'"},
        **fields,
    }
    (folder / "sweep.yml").write_text(yaml.safe_dump(spec))
    return "sweep.yml"


def test_wait_ls_show_and_resume(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweep_env: Path
) -> None:
    done = cli("-f", write_spec(sweep_env), "--wait")
    assert (
        "trial 0: complete" in done.stderr
        and "Succeeded: the grid tuner tried every configuration" in done.stderr
    )
    assert "best: trial" in done.stdout and "loss=2" in done.stdout
    listed = json.loads(cli("ls", "-o", "json").stdout)["items"]
    assert len(listed) == 1 and listed[0]["best"]["value"] == 2 and listed[0]["tuner"] == "grid"
    sweep_id = listed[0]["id"]
    table = cli("ls").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATUS", "TUNER", "TRIALS", "BEST"]
    assert table[1].split()[:4] == [sweep_id, "cli-sweep", "Succeeded", "grid"]
    shown = cli("show", sweep_id).stdout
    assert "objective:       maximize loss" in shown and "importance (ped-anova): x 1.00" in shown
    assert sorted(line.split()[2] for line in shown.splitlines()[-3:]) == ["complete"] * 3
    record = json.loads(cli("show", sweep_id, "-o", "json").stdout)
    assert sorted(t["objective"] for t in record["trials"]) == [0, 1, 2]
    refused = cli("resume", sweep_id, rc=2)
    assert f"sweep '{sweep_id}' has tried all 3 configurations of its grid tuner" in refused.stderr
    stopped = cli("stop", sweep_id, rc=2)
    assert f"kubelab: sweep '{sweep_id}' is not running" in stopped.stderr


def test_failing_sweep_exits_non_zero_with_json(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweep_env: Path
) -> None:
    spec = write_spec(
        sweep_env,
        tuner="random",
        max_trials=2,
        max_failed_trials=0,
        trial={"command": ["python", "-c", "import sys; sys.exit(2)"]},
    )
    done = cli("-o", "json", "-f", spec, "--wait", rc=1)
    record = json.loads(done.stdout)
    assert record["status"] == "Failed"
    # Both trials may run at once (concurrency), so either can be the one that tips it over.
    assert re.search(
        r"more than max_failed_trials \(0\); last: trial [01] failed: replica 0 exited with code 2",
        record["reason"],
    ), record["reason"]


def test_stop_and_resume_from_the_cli(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweep_env: Path
) -> None:
    spec = write_spec(
        sweep_env,
        tuner="random",
        max_trials=2,
        space={"x": {"_type": "uniform", "_value": [0, 1]}},
        trial={
            "command": [
                "python",
                "-c",
                "import os, time, kubelab\n"
                "while not os.path.exists('go'): time.sleep(0.05)\n"
                "kubelab.report(loss=1)",
            ]
        },
    )
    sweep_id = cli("-f", spec).stdout.strip()
    stopped = cli("stop", sweep_id)
    assert stopped.stdout.strip() == f"sweep {sweep_id} Stopped: stopped by user"
    (sweep_env / "go").write_text("")
    resumed = cli("resume", sweep_id, "--max-trials", "4", "--wait", "-o", "json")
    record = json.loads(resumed.stdout)
    assert record["status"] == "Succeeded" and record["max_trials"] == 4
    assert record["counts"]["succeeded"] == 4 and record["counts"]["stopped"] == 0  # interrupted ones rerun


def test_bad_input_is_refused_with_the_field(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweep_env: Path
) -> None:
    bad = cli("-f", write_spec(sweep_env, space={"lr": {"_type": "loguniform", "_value": [-1, 1]}}), rc=2)
    assert bad.stderr.startswith("kubelab: invalid") and "space.lr" in bad.stderr
    duplicate = sweep_env / "dup.yml"
    duplicate.write_text(
        "space: {x: {_type: choice, _value: [1]}}\nspace: {y: {_type: choice, _value: [2]}}\n"
    )
    assert "duplicate key 'space'" in cli("-f", "dup.yml", rc=2).stderr
    assert "no such file" in cli("-f", "missing.yml", rc=2).stderr
    assert "give a sweep spec with -f FILE" in cli(rc=2).stderr
    as_json = json.loads(cli("-f", write_spec(sweep_env, tuner="smac"), "-o", "json", rc=2).stderr)
    assert (
        as_json["fields"][0]["path"] == "tuner" and "SMAC is not available" in as_json["fields"][0]["reason"]
    )
    assert "no sweep 'nope'" in cli("show", "nope", rc=2).stderr
    assert not (sweep_env.parent / "home" / "sweeps").exists() or not list(
        (sweep_env.parent / "home" / "sweeps").iterdir()
    )


WATCHED = """\
import atexit, runpy, sys
loaded = lambda: sorted({name.split(".")[0] for name in sys.modules} & {"optuna", "sklearn"})
atexit.register(lambda: print("imported:", loaded(), file=sys.stderr))
sys.argv = ["kubelab", "sweep", *sys.argv[1:]]
runpy.run_module("kubelab.cli", run_name="__main__")
"""


def test_importance_is_computed_by_show_not_by_wait_and_cached(
    cli: Callable[..., subprocess.CompletedProcess[str]], sweep_env: Path
) -> None:
    space = {"x": {"_type": "uniform", "_value": [0, 1]}}  # three distinct values: x matters
    spec = write_spec(sweep_env, tuner="random", max_trials=3, concurrency=2, space=space)
    done = subprocess.run(
        [sys.executable, "-c", WATCHED, "-f", spec, "--wait", "-o", "json"],
        capture_output=True,
        text=True,
        cwd=sweep_env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # Following the sweep imported no Optuna, so neither its fANOVA nor scikit-learn.
    assert "imported: []" in done.stderr, done.stderr
    record = json.loads(done.stdout)
    assert record["counts"]["succeeded"] == 3 and record["importance"] is None
    cache = sweep_env.parent / "home" / "sweeps" / record["id"] / "importance.json"
    assert not cache.exists()

    shown = json.loads(cli("show", record["id"], "-o", "json").stdout)
    assert shown["importance"] == {"x": 1.0} and shown["importance_evaluator"] == "ped-anova"
    assert json.loads(cache.read_text()) == {"finished": 3, "evaluator": "ped-anova", "scores": {"x": 1.0}}
    # A second look reads the cache (a planted answer for the same 3 finished trials comes back)...
    cache.write_text(json.dumps({"finished": 3, "evaluator": "ped-anova", "scores": {"x": 0.25}}))
    assert json.loads(cli("show", record["id"], "-o", "json").stdout)["importance"] == {"x": 0.25}
    # ...until more trials have finished.
    cli("resume", record["id"], "--max-trials", "5", "--wait", "-o", "json")
    again = json.loads(cli("show", record["id"], "-o", "json").stdout)
    assert again["importance"] == {"x": 1.0} and json.loads(cache.read_text())["finished"] == 5


def test_a_cli_sweep_is_driven_by_the_driver_it_started_beside_itself(
    sweep_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With warm drivers on (the default outside tests), `kubelab sweep -f` starts a driver as
    it starts, so Optuna imports while the CLI reads and checks the spec, and hands it the
    sweep; after a refused spec that driver leaves with the CLI."""
    from kubelab.home import default_home
    from kubelab.sweeps.store import SweepDirectory
    from kubelab.warm import DRIVER, WarmPool

    monkeypatch.setenv("KUBELAB_WARM_DRIVERS", "1")
    (sweep_env / "gate.py").write_text(
        "import os, time, kubelab\n"
        "while not os.path.exists('go'):\n"
        "    time.sleep(0.05)\n"
        "kubelab.report(loss=kubelab.params()['x'])\n"
    )
    spec = write_spec(sweep_env, concurrency=1, trial={"command": ["python", "gate.py"]})
    command = [sys.executable, "-m", "kubelab.cli", "sweep", "-f", spec, "--wait", "-o", "json"]
    cli = subprocess.Popen(command, cwd=sweep_env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        state = None
        while state is None or state.driver_pid is None:
            assert time.monotonic() < deadline and cli.poll() is None, "the sweep never got a driver"
            time.sleep(0.05)
            folders = list((default_home() / "sweeps").glob("*/state.json"))
            state = SweepDirectory(folders[0].parent).read_state() if folders else None
        command_line = Path(f"/proc/{state.driver_pid}/cmdline").read_bytes().split(b"\0")
        assert b"kubelab.warm" in command_line and any(w.startswith(b"driver@") for w in command_line)
        (sweep_env / "go").write_text("")
        out, _ = cli.communicate(timeout=60)
    finally:
        cli.kill()
    assert cli.returncode == 0 and json.loads(out)["counts"]["succeeded"] == 3
    assert WarmPool(default_home(), DRIVER).idle() == []  # none left behind
    bad = write_spec(sweep_env, tuner="no-such-tuner")
    refused = subprocess.run(command[:5] + [bad], cwd=sweep_env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "tuner" in refused.stderr
    deadline = time.monotonic() + 30
    while WarmPool(default_home(), DRIVER).count():  # the one started for it leaves with the CLI
        assert time.monotonic() < deadline, "a driver started for a refused spec stayed"
        time.sleep(0.05)
