"""`GET usage`: the sidebar's "My usage", summed by a real Jupyter server from its user's run
records; a period that is not one is refused by name and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from jupyter_server_process import JupyterServer

# A run that records its own samples in the runner's format (the server samples nothing here):
# one GPU at `util` percent drawing `watts` for an hour.
SAMPLES = """\
import json, os, sys
util, watts = float(sys.argv[1]), float(sys.argv[2])
with open(os.path.join(os.environ["KUBELAB_RUN_DIR"], "system.jsonl"), "w") as handle:
    for t in (0, 1800, 3600):
        gpu = {"index": 0, "util": util}
        if watts:
            gpu["power_w"] = watts
        handle.write(json.dumps({"time": 1e9 + t, "gpus": [gpu]}) + "\\n")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("usage")
    env = {"KUBELAB_MACHINE_DIR": str(base / "machine"), "KUBELAB_SYSTEM_METRICS_INTERVAL": "0"}
    with JupyterServer(base / "root", base / "home", env=env) as running:
        (running.root / "samples.py").write_text(SAMPLES)
        yield running


def run(server: JupyterServer, *command: str) -> None:
    response = server.post("experiments", {"command": list(command)})
    assert response.status_code == 201, response.text
    assert server.wait_for(response.json()["id"])["status"] == "Succeeded"


def test_my_usage_sums_gpu_hours_energy_and_weighted_utilisation(server: JupyterServer) -> None:
    empty = server.get("usage").json()
    assert (empty["runs"], empty["gpu_hours"], empty["energy_wh"], empty["gpu_util"]) == (0, 0, 0, None)
    run(server, "python", "samples.py", "80", "300")
    run(server, "python", "samples.py", "20", "0")  # a board without power: no energy, not 0 W
    run(server, "python", "-c", "pass")  # nothing measured: a run, not 0% utilisation
    mine = server.get("usage", params={"since": "7d"}).json()
    assert mine["runs"] == 3 and mine["gpu_hours"] == 2.0 and mine["energy_wh"] == 300.0
    assert mine["gpu_util"] == 50.0  # (80 x 1 h + 20 x 1 h) / 2 h
    assert mine["since"].endswith("+00:00")
    assert [row["key"] for row in mine["by_type"]] == ["(any)"]


@pytest.mark.parametrize("since", ["lots", "0s", "-1d", "99999d"])
def test_a_period_that_is_not_one_is_refused_by_name(server: JupyterServer, since: str) -> None:
    refused = server.get("usage", params={"since": since})
    assert refused.status_code == 422, refused.text
    body = refused.json()
    assert body["fields"][0]["path"] == "since", json.dumps(body)
