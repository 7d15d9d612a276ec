"""The server's event loop never runs a blocking call.

A real Jupyter server runs with asyncio's debug mode and a small `slow_callback_duration`;
asyncio then logs "Executing <...> took N seconds" for every callback that held the loop
longer. The test submits an experiment whose code folder has thousands of files (the
snapshot copy), lists, reads logs and follows the event stream while the trial writes a
burst of metrics (the hub folds and encodes them), and expects no such warning.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from jupyter_server_process import JupyterServer

# Started instead of `python -m jupyter_server`: the same server, with every loop it
# creates in debug mode and asyncio's warnings written to the server's log.
LAUNCH = """
import asyncio, logging, sys
threshold = float(sys.argv.pop(1))
class DebugPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self):
        loop = super().new_event_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = threshold
        return loop
asyncio.set_event_loop_policy(DebugPolicy())
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("asyncio-log: %(message)s"))
logging.getLogger("asyncio").addHandler(handler)
logging.getLogger("asyncio").setLevel(logging.WARNING)
import gc, time
started = [0.0]
def log_full_collections(phase, info):  # a full collection also holds the loop: say so
    if phase == "start":
        started[0] = time.perf_counter()
    elif info["generation"] == 2:
        print(f"gc-log: full collection {time.perf_counter() - started[0]:.3f} s", file=sys.stderr)
gc.callbacks.append(log_full_collections)
from jupyter_server.serverapp import main
sys.exit(main())
"""
SLOW_CALLBACK = 0.1  # seconds: asyncio's own default, set explicitly; today's handlers take several
FILES = 4000  # in the code folder the snapshot copies, with one file of DATA bytes
DATA = 48 * 2**20
POINTS = 10_000  # metrics lines the trial writes at once

TRIAL = f"""
import json, os, time
with open(os.path.join(os.environ["KUBELAB_RUN_DIR"], "metrics.jsonl"), "a") as out:
    out.write("".join(json.dumps({{"step": i, "metrics": {{"loss": 1 / (i + 1)}}}}) + "\\n"
                      for i in range({POINTS})))
print("wrote metrics", flush=True)
time.sleep(120)
"""


class DebugLoopServer(JupyterServer):
    def command(self) -> list[str]:
        command = super().command()
        assert command[1:3] == ["-m", "jupyter_server"]
        return [sys.executable, "-c", LAUNCH, str(SLOW_CALLBACK), *command[3:]]


def loop_log(log: Path, offset: int) -> tuple[list[str], list[str]]:
    """asyncio's slow-callback warnings since `offset`, and the full garbage collections."""
    lines = log.read_bytes()[offset:].decode(errors="replace").splitlines()
    slow = [line for line in lines if re.search(r"Executing .* took \d", line)]
    return slow, [line for line in lines if line.startswith("gc-log:")]


def follow_events(server: JupyterServer, seen: dict[str, int], stop: threading.Event) -> None:
    """Read the event stream, counting metrics points per experiment, until told to stop."""
    try:
        with requests.get(server.api + "events", headers=server.headers, stream=True, timeout=60) as reply:
            kind = ""
            for line in reply.iter_lines(decode_unicode=True):
                if stop.is_set():
                    return
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind == "metrics":
                    data = json.loads(line[6:])
                    seen[data["id"]] = seen.get(data["id"], 0) + len(data["points"])
    except requests.RequestException:
        if not stop.is_set():  # the server going away at the end is expected
            raise


@pytest.mark.slow
def test_submit_list_logs_and_events_never_block_the_loop(tmp_path: Path) -> None:
    root, home = tmp_path / "work", tmp_path / "home"
    code = root / "project"
    for index in range(FILES):
        folder = code / f"pkg{index % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{index}.py").write_text(f"VALUE = {index}\n")
    (code / "train.py").write_text(TRIAL)
    (code / "weights.bin").write_bytes(os.urandom(DATA))
    with DebugLoopServer(root, home, env={"KUBELAB_WARM_RUNNERS": "0"}) as server:
        # Startup (imports, the first look at the runs) is not what this test is about.
        time.sleep(1.0)
        offset = server.log.stat().st_size
        seen: dict[str, int] = {}
        stop = threading.Event()
        reader = threading.Thread(target=follow_events, args=(server, seen, stop), daemon=True)
        reader.start()

        reply = server.post(
            "experiments", {"name": "loop", "code": "project", "command": ["python", "train.py"]}
        )
        assert reply.status_code == 201, reply.text
        run_id = reply.json()["id"]
        try:
            deadline = time.monotonic() + 90
            while seen.get(run_id, 0) < POINTS and time.monotonic() < deadline:
                listed = server.get("experiments", params={"query": "status:running"})
                assert listed.status_code == 200, listed.text
                assert server.get(f"experiments/{run_id}/logs").status_code == 200
                time.sleep(0.2)
            # every point reached the stream, though each list above refreshed the index first
            assert seen.get(run_id) == POINTS, f"the event stream carried {seen.get(run_id)} points"
            assert "wrote metrics" in server.get(f"experiments/{run_id}/logs").text
        finally:
            stop.set()
            assert server.post(f"experiments/{run_id}/stop").status_code == 200
            server.wait_for(run_id)

        slow, collections = loop_log(server.log, offset)
        assert slow == [], "callbacks held the server's event loop:\n" + "\n".join(slow + collections)
