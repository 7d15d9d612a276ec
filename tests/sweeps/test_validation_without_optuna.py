"""Creating a sweep validates everything without importing Optuna (it costs ~0.4 s).

What only Optuna's constructors used to refuse (CMA-ES flag pairs, bootstrapping pruners
with an "auto" resource, a sampler's missing packages) is refused up front, by field.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubelab.errors import ValidationError
from kubelab.sweeps.service import Sweeps
from kubelab.sweeps.sweep_spec import SweepSpec

SPACE = {"x": {"_type": "uniform", "_value": [0, 1]}}


def sweep(**changes: Any) -> dict[str, Any]:
    data = {"space": SPACE, "tuner": "tpe", "max_trials": 3, "trial": {"command": ["python", "t.py"]}}
    data.update(changes)
    return data


def problems(data: object) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        SweepSpec.parse(data)
    return {f.path: f.reason for f in info.value.fields}


def test_creating_a_sweep_does_not_import_optuna(sweep_env: Path) -> None:
    (sweep_env / "t.py").write_text("print(1)\n")
    code = (
        "import json, sys\n"
        "from kubelab.experiments import Experiments\n"
        "from kubelab.sweeps.service import Sweeps\n"
        f"spec = Sweeps(Experiments()).validate(json.loads({json.dumps(json.dumps(sweep()))}), "
        f"__import__('pathlib').Path('.'), False)\n"
        "print(json.dumps([spec.tuner.name, 'optuna' in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["tpe", False]


def test_a_cli_following_its_sweep_to_the_end_imports_nothing_it_does_not_use(sweep_env: Path) -> None:
    """`kubelab sweep --wait` starts before any trial can: numpy (a run's system series), the
    query language, the runner and GPU ledger, importlib.metadata (entry points) and Optuna
    are for other processes, each 10-90 ms of imports paid before the driver even starts."""
    (sweep_env / "t.py").write_text("import nni\nnni.report_final_result(nni.get_next_parameter()['x'])\n")
    (sweep_env / "config.yml").write_text(json.dumps(sweep(max_trials=2, parameter_style="env")))
    unused = ["numpy", "kubelab.query", "kubelab.backends.local.runner", "kubelab.backends.local.gpus"]
    unused += ["importlib.metadata", "optuna"]
    code = (
        "import json, sys\n"
        "from kubelab.cli import main\n"
        "code = main(['sweep', '-f', 'config.yml', '--wait', '-o', 'json'])\n"
        f"print(json.dumps([code, [name for name in {unused!r} if name in sys.modules]]), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout)["counts"]["succeeded"] == 2
    assert json.loads(out.stderr.splitlines()[-1]) == [0, []]


@pytest.mark.parametrize(
    ("args", "path", "other"),
    [
        ({"use_separable_cma": True, "with_margin": True}, "tuner.args.with_margin", "use_separable_cma"),
        ({"use_separable_cma": True, "lr_adapt": True}, "tuner.args.lr_adapt", "use_separable_cma"),
        ({"with_margin": True, "lr_adapt": True}, "tuner.args.lr_adapt", "with_margin"),
    ],
)
def test_cmaes_flag_pairs_optuna_refuses_are_refused_by_field(
    args: dict[str, Any], path: str, other: str
) -> None:
    found = problems(sweep(tuner={"name": "cmaes", "args": args}))
    assert found[path] == f"cannot be combined with {other}"


def test_cmaes_flags_alone_are_fine() -> None:
    spec = SweepSpec.parse(sweep(tuner={"name": "cmaes", "args": {"with_margin": True}}))
    assert spec.tuner.kwargs == {"with_margin": True}


@pytest.mark.parametrize(("name", "resource"), [("hyperband", "max_resource"), ("asha", "min_resource")])
def test_bootstrapping_pruners_need_a_fixed_resource(name: str, resource: str) -> None:
    found = problems(sweep(early_stopping={"name": name, "args": {"bootstrap_count": 2}}))
    assert found["early_stopping.args.bootstrap_count"].startswith(f"needs {resource} set to a number")
    fixed = {"bootstrap_count": 2, resource: 8}
    if name == "asha":
        fixed["min_resource"] = 1
    assert SweepSpec.parse(sweep(early_stopping={"name": name, "args": fixed})).early_stopping.name == name


def test_a_tuner_missing_its_packages_is_refused_before_anything_is_written(
    sweeps: Sweeps, sweep_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "scipy" else real(n, *a))
    (sweep_env / "t.py").write_text("print(1)\n")
    with pytest.raises(ValidationError) as info:
        sweeps.create(sweep(tuner="qmc"), base_dir=sweep_env)
    assert {f.path: f.reason for f in info.value.fields} == {
        "tuner.name": "qmc needs the Python packages scipy; install them first"
    }
    assert not list(sweeps.store.all())
