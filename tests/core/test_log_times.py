"""Each log line's arrival time: the runner's side index, and `timestamps` on every way of asking."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from jupyter_server_process import JupyterServer
from kubelab_testing import wait_until

from kubelab.experiments import Experiments
from kubelab.log_times import index_of

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) ")
# What the program prints: lines apart in time, a character of several bytes, an unended line.
PRINTS = ["epoch 0 loss 1.0\n", "epoch 1 loss 0.5 — ok\n", "\n", "epoch 2 loss 0.25\n", "done, no newline"]
PROGRAM = textwrap.dedent(
    f"""
    import sys, time
    for piece in {PRINTS!r}:
        sys.stdout.write(piece)
        sys.stdout.flush()
        time.sleep(0.3)
    """
)


def times_of(text: str) -> list[datetime]:
    found = []
    for line in text.splitlines():
        match = STAMP.match(line)
        assert match, f"line without its time: {line!r}"
        found.append(datetime.fromisoformat(match.group(1)))
    return found


def test_runner_indexes_each_line_and_keeps_the_log_byte_for_byte(lab: Experiments, lab_env: Path) -> None:
    (lab_env / "lines.py").write_text(PROGRAM)
    record = lab.submit({"command": [sys.executable, str(lab_env / "lines.py")]})
    assert wait_until(lab, record["id"])["status"] == "Succeeded"
    log = lab.runs_root / record["id"] / "logs" / "replica-0.log"
    assert log.read_bytes() == "".join(PRINTS).encode()  # what was printed, and nothing else
    assert index_of(log).exists()

    text = "".join(lab.logs(record["id"], timestamps=True))
    times = times_of(text)
    assert len(times) == len(PRINTS)
    assert all(a < b for a, b in zip(times, times[1:], strict=False)), times  # 0.3 s apart
    assert [STAMP.sub("", line) for line in text.splitlines(keepends=True)] == PRINTS

    # A byte range counts bytes of the timestamped text, wherever it starts and ends.
    whole = text.encode()
    for start, length in ((0, 10), (27, 40), (len(whole) - 5, 100)):
        part = "".join(lab.logs(record["id"], start=start, length=length, timestamps=True))
        assert part.encode() == whole[start : start + length]
    assert "".join(lab.logs(record["id"])) == "".join(PRINTS)  # without: the log itself

    cli = [sys.executable, "-m", "kubelab.cli", "logs", record["id"], "--timestamps"]
    printed = subprocess.run(cli, capture_output=True, text=True, cwd=lab_env, timeout=120, check=True)
    assert printed.stdout == text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("stamps")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_STOP_GRACE": "2"}
    with JupyterServer(base / "root", base / "home", env=env) as running:
        (running.root / "lines.py").write_text(PROGRAM)
        yield running


def test_rest_timestamps_follow_and_refusal(server: JupyterServer) -> None:
    run_id = server.post("experiments", {"command": ["python", "lines.py"]}).json()["id"]
    followed = server.get(f"experiments/{run_id}/logs", params={"follow": 1, "timestamps": "true"})
    assert followed.status_code == 200
    assert len(times_of(followed.text)) == len(PRINTS)  # streamed to the run's end, every line timed
    assert server.wait_for(run_id)["status"] == "Succeeded"

    again = server.get(f"experiments/{run_id}/logs", params={"timestamps": 1}).text
    assert again == followed.text  # the times are the index's, not the reader's clock
    ranged = server.get(f"experiments/{run_id}/logs", params={"timestamps": 1, "offset": 5, "length": 30})
    assert ranged.text.encode() == again.encode()[5:35]
    assert server.get(f"experiments/{run_id}/logs").text == "".join(PRINTS)

    refused = server.get(f"experiments/{run_id}/logs", params={"timestamps": "maybe"})
    assert refused.status_code == 422  # as a bad offset or length: the request, not the server
    assert [f["path"] for f in refused.json()["fields"]] == ["timestamps"]

    document = server.get("openapi.json").json()
    logs = document["paths"]["/kubelab/api/experiments/{run_id}/logs"]["get"]
    assert "timestamps" in [p["name"] for p in logs["parameters"]]
