"""Limits that hold: log streams cannot starve the server, logs are read in bounded chunks,
and a stop reaches every process a run started, even those that left its process group."""

from __future__ import annotations

import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from jupyter_server_process import JupyterServer
from kubelab_testing import wait_until

from kubelab.experiments import Experiments
from kubelab.logfiles import LOG_CHUNK
from kubelab.pids import pid_alive

STREAMS = 8  # the server's limit in this test (KUBELAB_MAX_LOG_STREAMS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("dos")
    env = {
        "KUBELAB_MACHINE_DIR": str(base / "machine"),
        "KUBELAB_STOP_GRACE": "2",
        "KUBELAB_MAX_LOG_STREAMS": str(STREAMS),
        "KUBELAB_MAX_EVENT_STREAMS": "2",
    }
    with JupyterServer(base / "root", base / "home", env=env) as running:
        yield running


def open_stream(server: JupyterServer, run_id: str) -> requests.Response:
    return requests.get(
        server.api + f"experiments/{run_id}/logs",
        params={"follow": "1"},
        headers=server.headers,
        stream=True,
        timeout=60,
    )


def test_following_logs_does_not_starve_other_requests(server: JupyterServer) -> None:
    run_id = server.post("experiments", {"command": ["sleep", "120"]}).json()["id"]
    server.wait_for(run_id, states=("Running",))
    streams = [open_stream(server, run_id) for _ in range(7)]
    try:
        assert all(s.status_code == 200 for s in streams)
        # what seven followers used to hang: Jupyter's worker threads were all theirs
        assert requests.get(server.api + "resources", headers=server.headers, timeout=20).status_code == 200
        streams += [open_stream(server, run_id) for _ in range(STREAMS - 7)]
        assert all(s.status_code == 200 for s in streams)
        extra = open_stream(server, run_id)
        assert extra.status_code == 429, extra.status_code
        assert "log streams" in extra.json()["detail"]
        stopped = requests.post(server.api + f"experiments/{run_id}/stop", headers=server.headers, timeout=30)
        assert stopped.status_code == 200, stopped.text
        assert server.wait_for(run_id)["status"] == "Stopped"
        for stream in streams:  # each follower ends with the run
            for _ in stream.iter_content(chunk_size=None):
                pass
    finally:
        for stream in streams:
            stream.close()
    again = open_stream(server, run_id)  # the slots came back
    assert again.status_code == 200
    again.close()


def test_event_streams_are_limited_too(server: JupyterServer) -> None:
    def events() -> requests.Response:
        return requests.get(server.api + "events", headers=server.headers, stream=True, timeout=30)

    open_ones = [events(), events()]
    try:
        assert [s.status_code for s in open_ones] == [200, 200]
        extra = events()
        assert extra.status_code == 429 and "event streams" in extra.json()["detail"]
        assert server.get("resources").status_code == 200
    finally:
        for stream in open_ones:
            stream.close()


def test_a_closed_follower_gives_its_slot_back(server: JupyterServer) -> None:
    run_id = server.post("experiments", {"command": ["sleep", "60"]}).json()["id"]
    server.wait_for(run_id, states=("Running",))
    try:
        for _ in range(3 * STREAMS):  # more than the limit, one after another
            for _attempt in range(100):  # the server notices a closed client at its next idle tick
                stream = open_stream(server, run_id)
                if stream.status_code != 429:
                    break
                stream.close()
                time.sleep(0.1)
            assert stream.status_code == 200
            stream.close()
    finally:
        server.post(f"experiments/{run_id}/stop")


def test_log_byte_ranges(server: JupyterServer) -> None:
    run_id = server.post("experiments", {"command": ["python", "-c", "print('0123456789' * 3)"]}).json()["id"]
    server.wait_for(run_id)
    response = server.get(f"experiments/{run_id}/logs", params={"offset": 5, "length": 10})
    assert response.status_code == 200 and response.text == "5678901234"
    assert server.get(f"experiments/{run_id}/logs", params={"offset": 25}).text == "56789\n"


def test_a_large_log_is_read_in_bounded_chunks(lab: Experiments, lab_env: Path) -> None:
    size = 3 * LOG_CHUNK + 12345
    code = f"import sys; sys.stdout.write('é' * {size // 2})"
    record = lab.submit({"command": [sys.executable, "-c", code]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    chunks = list(lab.logs(record["id"]))
    assert max(len(c.encode()) for c in chunks) <= LOG_CHUNK
    assert "".join(chunks) == "é" * (size // 2)  # no character torn at a chunk boundary


def write(path: Path, body: str) -> str:
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_a_stop_reaches_processes_that_left_the_process_group(lab: Experiments, lab_env: Path) -> None:
    pids = lab_env / "pids"
    trial = write(
        lab_env / "escape.py",
        f"""
        import os, subprocess, sys, time
        # a new session (setsid), and a daemon whose parent exits (re-parented away from us)
        own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        daemon = subprocess.Popen([sys.executable, "-c",
            "import os, subprocess, sys, time\\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\\n"
            "open({str(pids)!r} + '.daemon', 'w').write(str(p.pid))\\n"])
        daemon.wait()
        open({str(pids)!r}, "w").write(str(own.pid))
        time.sleep(300)
    """,
    )
    record = lab.submit({"command": [sys.executable, trial]})
    wait_until(lab, record["id"], states=("Running",))
    for _ in range(600):
        if pids.exists() and (lab_env / "pids.daemon").exists():
            break
        time.sleep(0.05)
    escaped = [int(pids.read_text()), int((lab_env / "pids.daemon").read_text())]
    assert all(pid_alive(pid) for pid in escaped)
    lab.stop(record["id"])
    assert wait_until(lab, record["id"])["status"] == "Stopped"
    for pid in escaped:
        for _ in range(100):
            if not pid_alive(pid):
                break
            time.sleep(0.1)
    survivors = [pid for pid in escaped if pid_alive(pid)]
    for pid in survivors:  # leave nothing behind, whatever the outcome
        os.kill(pid, 9)
    assert not survivors


def test_a_finished_run_leaves_no_daemon_behind(lab: Experiments, lab_env: Path) -> None:
    # The run exits 0 at once; its grandchild, in a session of its own, outlives its parent and
    # so becomes the runner's child (the runner is a subreaper): the run's end must kill it.
    pid_file = lab_env / "daemon.pid"
    trial = write(
        lab_env / "leave.py",
        f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c",
            "import subprocess, sys\\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\\n"
            "open({str(pid_file)!r}, 'w').write(str(p.pid))\\n"]).wait()
    """,
    )
    record = lab.submit({"command": [sys.executable, trial]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    daemon = int(pid_file.read_text())
    for _ in range(100):
        if not pid_alive(daemon):
            break
        time.sleep(0.1)
    alive = pid_alive(daemon)
    if alive:
        os.kill(daemon, 9)  # leave nothing behind, whatever the outcome
    assert not alive


def test_tensorboard_sessions_are_capped_per_server(tmp_path: Path) -> None:
    env = {"KUBELAB_MACHINE_DIR": str(tmp_path / "machine"), "KUBELAB_MAX_TENSORBOARDS": "1"}
    with JupyterServer(tmp_path / "root", tmp_path / "home", env=env) as server:
        runs = [
            server.post("experiments", {"command": ["true"], "name": f"tb{i}"}).json()["id"] for i in range(2)
        ]
        first = server.post("tensorboards", {"experiments": [runs[0]]})
        assert first.status_code == 201, first.text
        second = server.post("tensorboards", {"experiments": [runs[1]]})
        assert second.status_code == 429, second.text
        assert "KUBELAB_MAX_TENSORBOARDS" in second.json()["detail"]
        assert len(server.get("tensorboards").json()["items"]) == 1  # nothing was started
        assert server.delete(f"tensorboards/{first.json()['id']}").status_code == 200
        again = server.post("tensorboards", {"experiments": [runs[1]]})
        assert again.status_code == 201, again.text
        server.delete(f"tensorboards/{again.json()['id']}")
