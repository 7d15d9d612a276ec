"""The sweep REST resources through a real Jupyter server, and a sweep surviving a server restart."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from driver_support import stop_leftovers
from jupyter_server_process import JupyterServer
from sweep_support import trial_runs, wait_driver_gone

from kubelab.experiments import Experiments
from kubelab.sweeps.service import Sweeps

SPACE = {"x": {"_type": "uniform", "_value": [-2, 2]}}
SCRIPT = "import time, kubelab; time.sleep(0.2); kubelab.report(loss=kubelab.params()['x'] ** 2)"


def sweep_spec(**fields: Any) -> dict[str, Any]:
    return {
        "space": SPACE,
        "objective": {"metric": "loss"},
        "tuner": "random",
        "max_trials": 3,
        "concurrency": 2,
        "trial": {"command": ["python", "-c", SCRIPT]},
        **fields,
    }


def server_env(base: Path) -> dict[str, str]:
    return {
        "KUBELAB_MACHINE_DIR": str(base / "machine"),
        "KUBELAB_STOP_GRACE": "2",
        "KUBELAB_SWEEP_CRASH": "",
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    """One server for the module's REST tests (starting one takes seconds); each test makes its own sweeps."""
    base = tmp_path_factory.mktemp("rest")
    try:
        with JupyterServer(base / "workspace", base / "home", env=server_env(base)) as running:
            yield running
    finally:
        stop_leftovers(base / "home")


def patch(server: JupyterServer, path: str, body: object) -> requests.Response:
    return requests.patch(server.api + path, headers=server.headers, json=body, timeout=30)


def wait_status(
    server: JupyterServer, sweep_id: str, until: Callable[[dict[str, Any]], bool], timeout: float = 60.0
) -> dict[str, Any]:
    """Poll the (cheap) list until `until(record)`, then return the full record."""
    deadline = time.monotonic() + timeout
    record: dict[str, Any] = {}
    while time.monotonic() < deadline:
        record = next(r for r in server.get("sweeps").json()["items"] if r["id"] == sweep_id)
        if until(record):
            full: dict[str, Any] = server.get(f"sweeps/{sweep_id}").json()
            return full
        time.sleep(0.1)
    raise AssertionError(f"sweep {sweep_id}: {record}")


class EventReader(threading.Thread):
    """Collects `event: sweep` payloads from the server's event stream."""

    def __init__(self, server: JupyterServer) -> None:
        super().__init__(daemon=True)
        self.response = requests.get(server.api + "events", headers=server.headers, stream=True, timeout=60)
        self.sweeps: list[dict[str, Any]] = []

    def run(self) -> None:
        kind = None
        try:
            for line in self.response.iter_lines(chunk_size=1, decode_unicode=True):  # unbuffered
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "sweep":
                    self.sweeps.append(json.loads(line[6:]))
        except Exception:  # the test closed the stream
            return


def test_create_list_get_extend_with_events(server: JupyterServer) -> None:
    events = EventReader(server)
    events.start()
    created = server.post("sweeps", sweep_spec(name="rest"))
    assert created.status_code == 201, created.text
    record = created.json()
    assert record["status"] == "Running" and record["name"] == "rest" and record["max_trials"] == 3
    assert set(record) >= {
        "id",
        "name",
        "status",
        "reason",
        "objective",
        "tuner",
        "early_stopping",
        "max_trials",
        "concurrency",
        "counts",
        "finished",
        "best",
        "created_at",
        "finished_at",
    }
    sweep_id = record["id"]
    listed = server.get("sweeps").json()
    assert listed["items"][0]["id"] == sweep_id
    extended = patch(server, f"sweeps/{sweep_id}", {"max_trials": 4})
    assert extended.status_code == 200 and extended.json()["max_trials"] == 4, extended.text
    done = wait_status(server, sweep_id, lambda r: r["status"] != "Running")
    assert done["status"] == "Succeeded" and done["counts"]["succeeded"] == 4, done
    assert sorted(t["trial"] for t in done["trials"]) == [0, 1, 2, 3]
    assert done["best"]["value"] == min(t["objective"] for t in done["trials"])
    assert set(done["importance"]) == {"x"}
    queried = server.get("experiments", params={"query": f"sweep:{sweep_id}", "sort": "metrics.loss"}).json()
    assert queried["total"] == 4 and queried["items"][0]["id"] == done["best"]["id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(
        e["id"] == sweep_id and e["status"] == "Succeeded" for e in events.sweeps
    ):
        time.sleep(0.1)
    mine = [e for e in events.sweeps if e["id"] == sweep_id]
    assert mine[0]["status"] == "Running" and mine[-1]["status"] == "Succeeded", mine
    assert any(0 < e["finished"] < 4 for e in mine)  # progress, not just the ends
    openapi = server.get("openapi.json").json()
    assert {"/kubelab/api/sweeps", "/kubelab/api/sweeps/{sweep_id}/resume"} <= set(openapi["paths"])


def test_stop_resume_and_nni_body(server: JupyterServer) -> None:
    gate = server.root / "go"
    script = f"import os, time, kubelab\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\nkubelab.report(loss=1)"
    sweep_id = server.post("sweeps", sweep_spec(trial={"command": ["python", "-c", script]})).json()["id"]
    wait_status(server, sweep_id, lambda r: r["counts"]["running"] == 2)
    stopped = server.post(f"sweeps/{sweep_id}/stop")
    assert stopped.status_code == 200 and stopped.json()["status"] == "Stopped", stopped.text
    again = server.post(f"sweeps/{sweep_id}/stop")
    assert again.status_code == 409 and "is not running" in again.json()["detail"]
    gate.write_text("")
    resumed = server.post(f"sweeps/{sweep_id}/resume", {"max_trials": 4})
    assert resumed.status_code == 200 and resumed.json()["status"] == "Running", resumed.text
    done = wait_status(server, sweep_id, lambda r: r["status"] != "Running")
    interrupted = {"stopped": 0, "interrupted": 2}  # the stop's trials ran again, outside the budget
    assert done["counts"] == {"running": 0, "succeeded": 4, "failed": 0, "pruned": 0, **interrupted}, done

    code = server.root / "nni"
    code.mkdir()
    (code / "trial.py").write_text("import nni\nnni.report_final_result(nni.get_next_parameter()['x'])\n")
    nni = server.post(
        "sweeps",
        {
            "nni": {
                "trialCommand": "python3 trial.py",
                "trialCodeDirectory": "nni",
                "maxTrialNumber": 2,
                "searchSpace": SPACE,
                "tuner": {"name": "Random"},
            }
        },
    )
    assert nni.status_code == 201, nni.text
    assert nni.json()["objective"] == {"metric": "default", "direction": "minimize"}
    done = wait_status(server, nni.json()["id"], lambda r: r["status"] != "Running")
    assert done["status"] == "Succeeded" and done["counts"]["succeeded"] == 2, done


def test_errors_name_the_field_and_start_nothing(server: JupyterServer) -> None:
    bad = server.post("sweeps", sweep_spec(space={"lr": {"_type": "loguniform", "_value": [0, 1]}}))
    assert bad.status_code == 422
    assert bad.json()["error"] == "invalid" and bad.json()["fields"][0]["path"].startswith("space.lr")
    unknown = server.post("sweeps", sweep_spec(tuner="hyperopt"))
    assert unknown.status_code == 422 and "unknown tuner 'hyperopt'" in unknown.text
    duplicate = requests.post(
        server.api + "sweeps",
        headers=server.headers,
        timeout=30,
        data=(
            '{"space": {"lr": {"_type": "uniform", "_value": [0, 1]}, "lr": {"_type": "uniform", "_value": [0, 2]}},'
            ' "max_trials": 1, "trial": {"command": ["true"]}}'
        ),
    )
    assert duplicate.status_code == 422 and "duplicate key 'lr'" in duplicate.text
    outside = server.post("sweeps", sweep_spec(trial={"command": ["true"], "workdir": "/"}))
    assert outside.status_code == 422 and "outside the workspace" in outside.text
    assert not list((server.home / "sweeps").glob(".*"))  # no half-made sweep folder either
    before = {r["id"] for r in server.get("sweeps").json()["items"]}
    assert server.get("sweeps/0123456789ab").status_code == 404
    assert server.post("sweeps/nope/stop").status_code == 404
    sweep_id = server.post("sweeps", sweep_spec(max_trials=1)).json()["id"]
    assert {r["id"] for r in server.get("sweeps").json()["items"]} == before | {sweep_id}
    wait_status(server, sweep_id, lambda r: r["status"] != "Running")
    refused = patch(server, f"sweeps/{sweep_id}", {"max_trials": "more"})
    assert refused.status_code == 422 and refused.json()["fields"][0]["path"] == "max_trials"
    assert server.post(f"sweeps/{sweep_id}/resume").status_code == 409  # its one trial is used
    assert requests.get(server.api + "sweeps", timeout=30).status_code == 403  # no token


def test_server_killed_mid_sweep_resumes_with_nothing_lost_or_repeated(tmp_path: Path) -> None:
    """The server and the driver both die; the next server restarts the driver, which re-attaches."""
    home, root, env = tmp_path / "home", tmp_path / "workspace", server_env(tmp_path)
    # 2 s trials: the four left after the kill cannot all end before the driver is killed too
    spec = sweep_spec(
        tuner="tpe", max_trials=6, trial={"command": ["python", "-c", SCRIPT.replace("0.2", "2")]}
    )
    with JupyterServer(root, home, env=env) as first:
        sweep_id = first.post("sweeps", spec).json()["id"]
        wait_status(first, sweep_id, lambda r: r["finished"] >= 2 and r["counts"]["running"] == 2)
        assert first.process is not None
        first.process.send_signal(signal.SIGKILL)
        first.process.wait()
    sweeps = Sweeps(Experiments(home))
    driver_pid = sweeps.sweep(sweep_id).read_state().driver_pid
    assert driver_pid is not None
    os.kill(driver_pid, signal.SIGKILL)  # as if the machine went down
    wait_driver_gone(sweeps, sweep_id)
    try:
        with JupyterServer(root, home, env=env) as second:
            done = wait_status(second, sweep_id, lambda r: r["status"] != "Running")
    finally:
        stop_leftovers(home)
    assert done["status"] == "Succeeded" and done["counts"]["succeeded"] == 6, done
    runs = trial_runs(home, sweep_id)
    assert sorted(runs) == list(range(6)) and all(len(ids) == 1 for ids in runs.values()), runs


def test_a_server_keeps_a_warm_driver_that_takes_the_next_sweep(tmp_path: Path) -> None:
    """The server's warm driver (kubelab.warm) serves a REST-created sweep; the server replaces it."""
    from kubelab.pids import pid_alive
    from kubelab.warm import DRIVER, WarmPool

    home = tmp_path / "home"
    drivers = WarmPool(home, DRIVER)

    def idle_driver(excluding: int | None = None, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [pid for pid in drivers.idle() if pid != excluding]
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no idle driver in {drivers.path}")

    env = {**server_env(tmp_path), "KUBELAB_WARM_DRIVERS": "1", "KUBELAB_WARM_DRIVER_IDLE": "60"}
    try:
        with JupyterServer(tmp_path / "workspace", home, env=env) as running:
            warm = idle_driver()
            sweep_id = running.post("sweeps", sweep_spec(max_trials=2)).json()["id"]
            assert warm not in drivers.idle()  # claimed by the create
            done = wait_status(running, sweep_id, lambda r: r["status"] != "Running")
            assert done["status"] == "Succeeded", done
            assert idle_driver(excluding=warm) != warm  # the server's next look (every 5 s)
            deadline = time.monotonic() + 10
            while pid_alive(warm) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not pid_alive(warm)  # a driver serves one sweep
    finally:
        stop_leftovers(home)
        for pid in drivers.idle():
            os.kill(pid, signal.SIGKILL)


def test_space_as_text_and_every_trials_metrics(server: JupyterServer) -> None:
    """The sweep dialog sends its search space as typed (YAML or JSON); the sweep view reads
    every trial's curve in one request."""
    yaml_space = "x:\n  _type: choice\n  _value: [1, 2]\n"
    spec = sweep_spec(space=yaml_space, tuner="grid")
    del spec["max_trials"]  # grid: the space is the budget
    created = server.post("sweeps", spec)
    assert created.status_code == 201, created.text
    sweep_id = created.json()["id"]
    bad_yaml = server.post("sweeps", sweep_spec(space="x: [unclosed\n"))
    assert bad_yaml.status_code == 422 and bad_yaml.json()["fields"][0]["path"] == "space", bad_yaml.text
    assert "not valid YAML" in bad_yaml.json()["fields"][0]["reason"]
    bad_json = server.post("sweeps", sweep_spec(space='{"x": {"_type": "choice", "_value": [1, 2]},}'))
    assert bad_json.status_code == 422 and "not valid JSON: line 1" in bad_json.json()["fields"][0]["reason"]
    bad_type = server.post("sweeps", sweep_spec(space='{"x": {"_type": "chooce", "_value": [1]}}'))
    assert bad_type.status_code == 422 and bad_type.json()["fields"][0]["path"].startswith("space.x")
    done = wait_status(server, sweep_id, lambda r: r["status"] != "Running")
    assert done["counts"]["succeeded"] == 2, done
    trials = server.get(f"sweeps/{sweep_id}/metrics").json()["trials"]
    assert [t["trial"] for t in trials] == [0, 1] and {t["result"] for t in trials} == {"complete"}
    by_id = {t["id"]: t for t in trials}
    for trial in done["trials"]:
        losses = [p["metrics"]["loss"] for p in by_id[trial["id"]]["points"] if "loss" in p["metrics"]]
        assert losses == [trial["params"]["x"] ** 2], by_id[trial["id"]]
    assert server.get("sweeps/0123456789ab/metrics").status_code == 404
    assert "/kubelab/api/sweeps/{sweep_id}/metrics" in server.get("openapi.json").json()["paths"]
