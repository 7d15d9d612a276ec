"""No TensorBoard outlives its server, however the server ends; idle sessions stop; reuse."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from jupyter_server_process import JupyterServer
from notebook_support import kill_if_alive, pid_alive, start_server, wait_gone

from kubelab.experiments import Experiments
from kubelab.tensorboard.session import run_label, session_id
from kubelab.tensorboard.supervisor import TensorBoardSupervisor


def experiment(home: Path) -> str:
    lab = Experiments(home)
    record = lab.submit({"name": "tb", "command": ["python", "-c", "print(1)"]})
    return str(record["id"])


def started_session(server: JupyterServer) -> dict[str, Any]:
    run_id = experiment(server.home)
    session: dict[str, Any] = server.post("tensorboards", {"experiments": [run_id]}).json()
    served = server.page(session["url"], allow_redirects=True)  # through its capability URL
    assert served.status_code == 200  # it serves: the process is really up
    assert pid_alive(session["pid"])
    return session


@pytest.mark.parametrize("how", ["sigterm", "api-shutdown", "sigkill"])
def test_no_tensorboard_survives_the_server(workspace: Path, how: str) -> None:
    server = start_server(workspace)
    assert server.process is not None
    try:
        session = started_session(server)
        again = server.post("tensorboards", {"experiments": list(session["source"]["experiments"])})
        assert again.status_code == 200 and again.json()["pid"] == session["pid"]  # reused
        if how == "sigterm":
            server.process.send_signal(signal.SIGTERM)
        elif how == "api-shutdown":
            reply = requests.post(server.url + "api/shutdown", headers=server.headers, timeout=30)
            assert reply.status_code in (200, 204)
        else:
            server.process.kill()  # no cleanup code runs: pdeathsig / the watchdog must act
        server.process.wait(30)
        assert wait_gone(session["pid"]), f"TensorBoard {session['pid']} outlived the server ({how})"
    finally:
        server.stop()
        if "session" in locals():
            kill_if_alive(session["pid"])


def test_idle_session_restarts_for_a_returning_page_but_not_after_a_stop(workspace: Path) -> None:
    server = start_server(workspace, KUBELAB_TENSORBOARD_IDLE_TIMEOUT="1.5")
    try:
        session = started_session(server)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            listed = server.get("tensorboards").json()["items"][0]
            if listed["state"] == "stopped":
                break
            time.sleep(0.2)
        assert listed["state"] == "stopped" and listed["reason"].startswith("idle for"), listed
        assert wait_gone(session["pid"])
        page = server.page(session["url"] + "data/runs", allow_redirects=True)  # an iframe coming back
        assert page.status_code == 200 and isinstance(page.json(), list)
        assert server.get(f"tensorboards/{session['id']}").json()["state"] == "running"
        stopped = server.delete(f"tensorboards/{session['id']}")
        assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
        assert stopped.json()["reason"] == "stopped on request"
        gone = server.page(session["url"], allow_redirects=True)  # its tab reloaded after the user stopped it
        assert gone.status_code == 410 and "was stopped" in gone.text
        assert server.get(f"tensorboards/{session['id']}").json()["state"] == "stopped"
    finally:
        server.stop()


PARENT = textwrap.dedent("""\
    import sys, threading, time
    from kubelab.experiments import Experiments
    from kubelab.tensorboard.supervisor import TensorBoardSupervisor
    lab = Experiments()
    run = lab.submit({"name": "x", "command": ["true"]})["id"]
    sup = TensorBoardSupervisor(lab)
    box = {}
    if sys.argv[1] == "thread":  # no pdeathsig from a thread: only the watchdog guards it
        t = threading.Thread(target=lambda: box.update(s=sup.start({"experiments": [run]})))
        t.start(); t.join()
    else:
        box["s"] = sup.start({"experiments": [run]})
    print(box["s"].pid, flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("where", ["main", "thread"])
def test_tensorboard_ends_when_its_parent_is_killed(lab_home: Path, where: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, where],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "KUBELAB_HOME": str(lab_home)},
    )
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    try:
        assert pid_alive(pid)
        parent.kill()
        parent.wait()
        assert wait_gone(pid, timeout=10), f"TensorBoard {pid} outlived its parent ({where})"
    finally:
        kill_if_alive(pid)


@pytest.fixture
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    return tmp_path / "home"


def test_sessions_are_reused_by_logdir_set_and_replaced_when_a_sweep_grows(lab_home: Path) -> None:
    lab = Experiments(lab_home)
    ids = [lab.submit({"name": f"r{i}", "command": ["true"]})["id"] for i in range(2)]
    supervisor = TensorBoardSupervisor(lab, idle_timeout=60)
    try:
        first = supervisor.start({"experiments": ids})
        same = supervisor.start({"experiments": list(reversed(ids))})
        assert same is first and first.id == session_id(first.logdirs)
        assert list(first.logdirs) == ["r0", "r1"]
        assert supervisor.reap_idle(now=time.time() + 61) == []  # still starting: not idle
        assert supervisor.wait_ready(first)
        assert supervisor.reap_idle(now=time.time() + 30) == []
        assert supervisor.reap_idle(now=time.time() + 61) == [first]
        assert first.state == "stopped" and not first.alive
        one = supervisor.start({"experiments": ids[:1]})
        assert one.id != first.id
        assert supervisor.stop(one.id).state == "stopped"
    finally:
        supervisor.stop_all()


def test_requests_that_name_nothing_are_refused(lab_home: Path) -> None:
    from kubelab.errors import NotFound, ValidationError

    supervisor = TensorBoardSupervisor(Experiments(lab_home))
    for request, error, path in [
        ([], ValidationError, ""),
        ({}, ValidationError, ""),
        ({"experiments": []}, ValidationError, "experiments"),
        ({"experiments": ["0123456789ab"]}, NotFound, "experiments[0]"),
        ({"sweep": "nosuchsweep"}, NotFound, "sweep"),
        ({"query": "status:running"}, NotFound, "query"),
        ({"query": "nosuchfield:1"}, ValidationError, "query"),
        ({"project": True}, NotFound, "project"),
        ({"project": "yes"}, ValidationError, "project"),
        ({"sweeps": "x"}, ValidationError, "sweeps"),
    ]:
        with pytest.raises(error) as caught:
            supervisor.resolve(request)
        assert caught.value.fields[0].path == path, (request, caught.value.fields)
    assert supervisor.sessions == {}


def test_run_labels_are_readable_and_safe_for_logdir_spec() -> None:
    trial = {"id": "a", "sweep": "s1", "trial": 3, "params": {"lr": 0.01, "opt": "adam,w:1"}}
    assert run_label(trial) == "trial-3-lr=0.01-opt=adam_w_1"
    assert run_label({"id": "b", "name": "my run: v2"}) == "my_run_v2"


def test_without_a_server_the_cli_prints_tensorboards_own_url_and_serves_there(lab_home: Path) -> None:
    run_id = experiment(lab_home)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBELAB_API_")}
    cli = subprocess.Popen(
        [sys.executable, "-m", "kubelab.cli", "tensorboard", "start", run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "KUBELAB_HOME": str(lab_home)},
    )
    assert cli.stdout is not None and cli.stderr is not None
    try:
        line = cli.stdout.readline()
        url = next(word for word in line.split() if word.startswith("http://127.0.0.1:"))
        assert "/kubelab/tensorboard-view/" in url, line
        served = requests.get(url, timeout=30)
        assert served.status_code == 200 and "<tb-webapp>" in served.text
        runs = requests.get(url + "data/runs", timeout=30)
        assert runs.status_code == 200 and runs.json() == []  # TensorBoard answers (the run wrote no events)
    finally:
        cli.send_signal(signal.SIGINT)
        assert cli.wait(30) == 0, cli.stderr.read()


def test_a_tensorboard_that_cannot_start_answers_502_naming_why(workspace: Path, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "tensorboard"  # first on the path of the server and its children
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("tensorboard is broken here (a test)")\n')
    server = start_server(workspace, PYTHONPATH=str(shadow.parent))
    try:
        session = server.post("tensorboards", {"experiments": [experiment(server.home)]}).json()
        page = server.page(session["url"], allow_redirects=True)  # the entry, then its capability URL
        assert page.status_code == 502, page.text[:300]
        assert page.json()["error"] == "backend" and "tensorboard is broken here" in page.json()["detail"]
        assert "sandbox" in page.headers["Content-Security-Policy"]  # errors are sandboxed too
        assert server.get(f"tensorboards/{session['id']}").json()["state"] == "failed"
    finally:
        server.stop()
