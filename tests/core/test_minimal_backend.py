"""A backend kubelab has never heard of, added the way a third party adds one (docs/architecture.md,
"Adding a backend"): an installed distribution's entry point in the group `kubelab.backends`, chosen
by `KUBELAB_BACKEND`. An experiment, a sweep and a pipeline then run on it end to end, their
drivers detached processes that find the backend by name as the submitter did; their trials and
steps are `tests/core/minimal_backend.py`'s plain subprocesses, not the local runner's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from driver_support import stop_leftovers, wait_record

from kubelab.backends.registry import backend_names, make_backend
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.pipelines.service import Pipelines
from kubelab.records import TERMINAL
from kubelab.sweeps.service import Sweeps

HERE = Path(__file__).resolve().parent
REPORT = "import kubelab; kubelab.report(loss=abs(kubelab.params()['x'] - 0.2))"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`minimal` installed as a distribution would install it: a .dist-info with the entry point,
    on the path of this process and of every process it starts."""
    site = tmp_path / "site"
    info = site / "kubelab_minimal_backend-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kubelab-minimal-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kubelab.backends]\nminimal = minimal_backend:MinimalBackend\n")
    path = [str(site), str(HERE)]
    monkeypatch.setenv("PYTHONPATH", ":".join(path))
    for entry in reversed(path):
        monkeypatch.syspath_prepend(entry)
    monkeypatch.setenv("KUBELAB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBELAB_MACHINE_DIR", str(tmp_path / "machine"))
    monkeypatch.setenv("KUBELAB_WARM_RUNNERS", "0")
    monkeypatch.setenv("KUBELAB_WARM_DRIVERS", "0")  # a warm driver would not have `site` on its path
    for name in ("KUBELAB_FAKE_GPUS", "KUBELAB_API_URL", "KUBELAB_SWEEP_CRASH", "KUBELAB_PIPELINE_CRASH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBELAB_BACKEND", "minimal")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield work
    stop_leftovers(tmp_path / "home")


def wait_run(lab: Experiments, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = lab.get(run_id)
        if record["status"] in TERMINAL:
            return record
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end: {lab.get(run_id)}")


def backend_of(lab: Experiments, run_id: str) -> str:
    status = json.loads((lab.runs_root / run_id / "status.json").read_text())
    return str(status["backend"])


def test_an_experiment_runs_on_an_installed_backend(installed: Path) -> None:
    lab = Experiments()
    assert lab.backend.name == "minimal" and "minimal" in backend_names()
    record = lab.submit({"command": ["python", "-c", REPORT], "params": {"x": 0.5}})
    done = wait_run(lab, record["id"])
    assert done["status"] == "Succeeded", done
    assert done["metrics"] == {"loss": pytest.approx(0.3)}
    assert backend_of(lab, record["id"]) == "minimal"
    assert "".join(lab.logs(record["id"])) == ""  # the trial printed nothing; the log is its own


def test_a_sweep_runs_on_an_installed_backend(installed: Path) -> None:
    sweeps = Sweeps(Experiments())
    record = sweeps.create(
        {
            "space": {"x": {"_type": "choice", "_value": [0.1, 0.2, 0.4]}},
            "objective": {"metric": "loss", "direction": "minimize"},
            "tuner": "grid",
            "max_trials": 3,
            "concurrency": 2,
            "parameter_style": "env",
            "trial": {"command": ["python", "-c", REPORT]},
        }
    )
    done = wait_record(sweeps.record, sweeps.sweep(record["id"]), "sweep", 90.0, None)
    assert done["status"] == "Succeeded" and done["counts"]["succeeded"] == 3, done
    assert done["best"]["params"] == {"x": 0.2}, done
    lab = sweeps.lab
    trials = lab.list(f"sweep:{record['id']}")[0]
    assert len(trials) == 3 and {backend_of(lab, t["id"]) for t in trials} == {"minimal"}


def test_a_pipeline_runs_on_an_installed_backend(installed: Path) -> None:
    (installed / "train.py").write_text(
        "import json, os, kubelab\n"
        "out = os.path.join(os.environ['KUBELAB_OUTPUTS_DIR'], 'model.json')\n"
        "json.dump({'x': kubelab.params()['x']}, open(out, 'w'))\n"
        "kubelab.report(acc=1 - kubelab.params()['x'])\n"
    )
    pipelines = Pipelines(Experiments())
    record = pipelines.create(
        {
            "steps": [
                {
                    "name": "tune",
                    "sweep": {
                        "space": {"x": {"_type": "choice", "_value": [0.1, 0.2]}},
                        "objective": {"metric": "loss", "direction": "minimize"},
                        "tuner": "grid",
                        "max_trials": 2,
                        "parameter_style": "env",
                        "trial": {"command": ["python", "-c", REPORT]},
                    },
                },
                {
                    "name": "train",
                    "depends_on": ["tune"],
                    "experiment": {
                        "command": ["python", "train.py"],
                        "params": {"x": "{{ steps.tune.best.params.x }}"},
                    },
                },
            ]
        }
    )
    done = wait_record(pipelines.record, pipelines.pipeline(record["id"]), "pipeline", 90.0, None)
    assert done["status"] == "Succeeded", done
    lab = pipelines.lab
    train = lab.get(done["steps"][1]["id"])
    assert train["params"] == {"x": 0.2} and train["metrics"] == {"acc": pytest.approx(0.8)}
    assert json.loads((Path(train["run_dir"]) / "outputs" / "model.json").read_text()) == {"x": 0.2}
    runs = lab.list(f"pipeline:{record['id']}")[0]
    assert len(runs) == 3 and {backend_of(lab, r["id"]) for r in runs} == {"minimal"}


def test_a_backend_is_found_by_module_path_and_unknown_names_are_refused(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert make_backend("minimal_backend:MinimalBackend").name == "minimal"
    with pytest.raises(ValidationError) as refused:
        make_backend("slurm")
    (field,) = refused.value.fields
    assert field.path == "KUBELAB_BACKEND" and "'slurm'" in field.reason
    assert "local" in field.reason and "kubernetes" in field.reason and "minimal" in field.reason
    with pytest.raises(ValidationError) as refused:
        make_backend("minimal_backend:Nothing", field="backend")
    assert refused.value.fields[0].path == "backend" and "Nothing" in refused.value.fields[0].reason


def test_the_local_backend_does_not_import_the_kubernetes_client() -> None:
    """The registry imports a backend's module when it is chosen, not before."""
    code = (
        "import sys; from kubelab.backends.registry import make_backend; make_backend('local'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes' or 'backends.kubernetes' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
