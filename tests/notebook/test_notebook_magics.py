"""`%%train`, `%stop`, `%experiments`, `%tensorboard` and refusals, in notebooks run by nbclient."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import requests
from jupyter_server_process import JupyterServer
from notebook_support import run_notebook, text_of

TRAIN_CELL = textwrap.dedent("""\
    %%train --name nb-train --wait -P lr=0.5
    import kubelab
    from helpers import schedule
    from torch.utils.tensorboard import SummaryWriter
    p = kubelab.params()
    writer = SummaryWriter(str(kubelab.tensorboard_dir()))
    for step in range(4):
        loss = schedule(step) * p["lr"]
        kubelab.report(step=step, loss=loss)
        writer.add_scalar("loss", loss, step)
    writer.close()
    print("trained with", p)
""")


def test_train_runs_to_success_with_metrics_and_tensorboard(server: JupyterServer) -> None:
    (server.root / "helpers.py").write_text("def schedule(step):\n    return 1.0 / (step + 1)\n")
    nb = run_notebook(
        server,
        [
            "%load_ext kubelab",
            TRAIN_CELL,
            "%experiments name:nb-train",
            "from kubelab.rest_client import RestClient\n"
            "rid = RestClient().list('name:nb-train')[0][0]['id']",
            "%tensorboard $rid",
            "%logs $rid",
        ],
    )
    trained = text_of(nb.cells[1])
    assert "Succeeded" in trained and "loss=0.125" in trained, trained  # --wait: the final result
    assert "trained with {'lr': 0.5}" in text_of(nb.cells[5])

    items = server.get("experiments", params={"query": "name:nb-train"}).json()["items"]
    assert len(items) == 1 and items[0]["status"] == "Succeeded"
    assert items[0]["metrics"] == {"loss": 0.125} and items[0]["params"] == {"lr": 0.5}
    code = Path(server.get(f"experiments/{items[0]['id']}").json()["run_dir"]) / "code"
    assert sorted(p.name for p in code.iterdir()) == ["cell.py", "helpers.py", "main.py"]  # snapshot

    table = nb.cells[2].outputs[0].data
    assert items[0]["id"] in table["text/html"] and "<table>" in table["text/html"]
    assert "nb-train" in table["text/plain"]

    shown = nb.cells[4].outputs[0].data
    assert "<iframe" in shown["text/html"] and "kubelab:open-tensorboard" in shown["text/html"]
    sessions = server.get("tensorboards").json()["items"]
    assert len(sessions) == 1 and list(sessions[0]["logdirs"]) == ["nb-train"]
    url = sessions[0]["url"]
    assert f'src="{url}"' in shown["text/html"]

    page = server.page(url, allow_redirects=True)  # through its capability URL
    assert page.status_code == 200 and "tensorboard" in page.text.lower()
    runs = server.page(url + "data/runs", allow_redirects=True)
    assert runs.status_code == 200 and any(r.startswith("nb-train") for r in runs.json())
    plugins = server.page(url + "data/plugins_listing", allow_redirects=True)
    assert plugins.status_code == 200 and plugins.json()["scalars"]["enabled"] is True
    for path in ("", "data/runs", "data/plugins_listing"):
        refused = server.page(url + path, token=False)
        assert refused.status_code in (302, 403), (path, refused.status_code)
        assert "tensorboard-view" not in refused.headers.get("Location", "")  # to the login, not in
    bad = requests.get(
        server.url + url.lstrip("/") + "data/runs",
        headers={"Authorization": "token wrong"},
        allow_redirects=False,
        timeout=30,
    )
    assert bad.status_code != 200 and "tensorboard-view" not in bad.headers.get("Location", "")


def test_train_returns_at_once_with_a_live_widget_and_stop_ends_it(server: JupyterServer) -> None:
    nb = run_notebook(
        server,
        [
            "%load_ext kubelab",
            "import os; os.environ['KUBELAB_WIDGETS'] = '1'",
            "%%train --name sleeper\nimport time\nfor i in range(600):\n    time.sleep(0.1)\n",
            "from kubelab.rest_client import RestClient\nrid = RestClient().list('name:sleeper')[0][0]['id']",
            "%stop $rid",
            "from kubelab.magics.connection import wait_until_done\n"
            "print(wait_until_done(RestClient(), rid)['status'])",
        ],
    )
    widget = nb.cells[2].outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" in widget
    assert "sleeper" in widget["text/plain"]  # what a frontend without widgets shows
    assert "stopping" in text_of(nb.cells[4])
    assert text_of(nb.cells[5]).strip() == "Stopped"
    record = server.get("experiments", params={"query": "name:sleeper"}).json()["items"][0]
    assert record["status"] == "Stopped" and record["reason"] == "stopped by user"


REFUSALS = [
    ("%%train --gpu 2\nprint(1)", "unknown option --gpu; did you mean '--gpus'?"),
    ("%%train --gpus -1\nprint(1)", "argument --gpus: must be 0 or more, not -1"),
    (
        "%%train --replicas 0\nprint(1)",
        "argument --replicas: must be a whole number of replicas (1 or more) or MIN:MAX, not '0'",
    ),
    ("%%train --memory lots\nprint(1)", "resources.memory: 'lots' is not a Kubernetes quantity"),
    ("%train -f missing.yaml", "file: no such file: missing.yaml"),
    ("%%train --sweep '{\"lr\": [0.1,'\nprint(1)", "sweep: not valid JSON"),
    ("%%train --sweep missing-space.json\nprint(1)", "sweep: no such file: missing-space.json"),
    ("%%train --trials 3\nprint(1)", "--trials needs --sweep SPACE"),
    ("%%train\ndef broken(:\n    pass", "cell: line 1: invalid syntax"),
    ("%tensorboard 0123456789ab", "no experiment or sweep '0123456789ab'"),
    ("%tensorboard", "give experiment ids, --sweep ID, --query PQL or --project"),
    ("%tensorboard --query 'status:nosuch'", "query:"),
    ("%stop nope", "no experiment 'nope'"),
]


def test_bad_input_is_refused_in_the_kernel_and_nothing_is_submitted(server: JupyterServer) -> None:
    nb = run_notebook(server, ["%load_ext kubelab", *(cell for cell, _ in REFUSALS)], allow_errors=True)
    for (cell, expected), executed in zip(REFUSALS, nb.cells[1:], strict=True):
        shown = text_of(executed)
        assert shown.startswith("UsageError: "), (cell, shown)  # no traceback, just the refusal
        assert expected in shown, (cell, shown)
        if cell.startswith("%%train --"):
            assert "usage: train" in shown or "kubelab:" in shown, (cell, shown)
    assert server.get("experiments").json()["total"] == 0
    assert server.get("tensorboards").json()["items"] == []


def test_tensorboard_api_refusals(server: JupyterServer) -> None:
    unknown = server.post("tensorboards", {"experiments": ["0123456789ab"]})
    assert unknown.status_code == 404
    assert unknown.json()["fields"] == [{"path": "experiments[0]", "reason": "no experiment '0123456789ab'"}]
    typo = server.post("tensorboards", {"experiment": ["x"]})
    assert typo.status_code == 422 and "did you mean 'experiments'" in typo.json()["fields"][0]["reason"]
    both = server.post("tensorboards", {"sweep": "a", "project": True})
    assert both.status_code == 422
    assert server.delete("tensorboards/nope").status_code == 404
    missing = server.page("kubelab/tensorboard/0123456789ab/")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


SPACE = {"lr": {"_type": "choice", "_value": [0.1, 0.5, 0.9]}}
SWEEP_CELL = textwrap.dedent("""\
    %%train --sweep space.json --tuner grid --trials 3 --objective loss --minimize --wait
    import kubelab
    p = kubelab.params()
    for step in range(3):
        kubelab.report(step=step, loss=p["lr"] / (step + 1))
    kubelab.report_final({"default": p["lr"] / 3, "loss": p["lr"] / 3})
""")


def test_sweep_runs_to_its_best_trial(server: JupyterServer) -> None:
    probe = server.get("sweeps")
    if probe.status_code == 404 and "json" not in probe.headers.get("Content-Type", ""):
        pytest.skip("PENDING: the sweeps REST API (/kubelab/api/sweeps) is not in this checkout yet")
    (server.root / "space.json").write_text(json.dumps(SPACE))
    nb = run_notebook(server, ["%load_ext kubelab", SWEEP_CELL], timeout=300)
    shown = text_of(nb.cells[1])
    assert "3/3 trials finished" in shown, shown
    assert "best: trial" in shown and "lr=0.1" in shown, shown
    sweeps = server.get("sweeps").json()["items"]
    assert len(sweeps) == 1 and sweeps[0]["best"]["params"] == {"lr": 0.1}
    session = server.post("tensorboards", {"sweep": sweeps[0]["id"]}).json()
    names = sorted(session["logdirs"])
    assert len(names) == 3 and all(n.startswith("trial-") for n in names), names
    assert sorted(n.split("-lr=")[1] for n in names) == ["0.1", "0.5", "0.9"], names
