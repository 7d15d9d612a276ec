"""`%pipeline` in a notebook run by nbclient against a real server: the live graph widget,
waiting for the end, a pipeline shown by its id, and refusals before anything starts."""

from __future__ import annotations

import json

from jupyter_server_process import JupyterServer
from notebook_support import run_notebook, text_of

FLOW = {
    "name": "nb-flow",
    "params": {"n": 1},
    "steps": [
        {
            "name": "train",
            "outputs": ["acc"],
            "experiment": {
                "command": [
                    "python",
                    "-c",
                    "import kubelab, sys; kubelab.report(acc=float(sys.argv[1]))",
                    "{{ params.n }}",
                ]
            },
        },
        {
            "name": "check",
            "depends_on": ["train"],
            "experiment": {
                "command": [
                    "python",
                    "-c",
                    "import sys; assert sys.argv[1] == '2.0'",
                    "{{ steps.train.metrics.acc }}",
                ]
            },
        },
    ],
}


def test_pipeline_magic_shows_a_live_graph_and_waits(server: JupyterServer) -> None:
    (server.root / "flow.json").write_text(json.dumps(FLOW))
    (server.root / "cycle.json").write_text(
        json.dumps({"steps": [{"name": "a", "depends_on": ["a"], "experiment": {"command": "true"}}]})
    )
    nb = run_notebook(
        server,
        [
            "%load_ext kubelab",
            "import os; os.environ['KUBELAB_WIDGETS'] = '1'",
            "%pipeline -f flow.json -P n=2 --wait",
            "from kubelab.rest_client import RestClient\npid = RestClient().pipelines()[0]['id']",
            "%pipeline $pid --detach",
            "%pipeline -f cycle.json",
        ],
        allow_errors=True,
    )
    widget = nb.cells[2].outputs[0].data
    assert "application/vnd.jupyter.widget-view+json" in widget
    assert "pipeline" in widget["text/plain"] and "train" in widget["text/plain"]
    waited = text_of(nb.cells[2])
    assert "Succeeded" in waited and "check: succeeded" in waited, waited
    shown = text_of(nb.cells[4])
    assert "nb-flow  Succeeded" in shown and "train: succeeded experiment" in shown, shown
    refused = text_of(nb.cells[5])
    assert refused.startswith("UsageError: kubelab: invalid pipeline spec"), refused
    assert "steps.a.depends_on: a step cannot depend on itself" in refused
    assert len(server.get("pipelines").json()["items"]) == 1
