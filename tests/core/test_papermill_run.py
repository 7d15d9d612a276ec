"""`python -m kubelab.papermill_run`: a real notebook executed by papermill with a real kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
from kubelab_testing import wait_until

from kubelab.experiments import Experiments
from kubelab.papermill_run import RunError, parameters_from_env, run


def make_notebook(path: Path, *cells: tuple[str, str, list[str]]) -> Path:
    """A notebook of (kind, source, tags) cells with a Python 3 kernelspec."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, source, tags in cells:
        cell = nbformat.v4.new_code_cell(source) if kind == "code" else nbformat.v4.new_markdown_cell(source)
        cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


TRAIN: tuple[tuple[str, str, list[str]], ...] = (
    ("markdown", "# train", []),
    ("code", "lr = 0.5\nepochs = 1", ["parameters"]),
    (
        "code",
        "import kubelab\nloss = lr / epochs\nkubelab.report(step=epochs, loss=loss)\nprint('loss is', loss)",
        [],
    ),
)


def execute(notebook: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubelab.papermill_run", str(notebook)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def outputs_of(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_parameters_reach_the_parameters_cell_and_the_output_is_saved(tmp_path: Path) -> None:
    notebook = make_notebook(tmp_path / "train.ipynb", *TRAIN)
    outputs = tmp_path / "run" / "outputs"
    done = execute(
        notebook,
        {
            "KUBELAB_PARAMS": json.dumps({"lr": 0.25, "epochs": 5}),
            "KUBELAB_OUTPUTS_DIR": str(outputs),
            "KUBELAB_RUN_DIR": str(tmp_path / "run"),
        },
    )
    assert done.returncode == 0, done.stderr
    executed = outputs / "train.ipynb"
    assert f"saved to {executed}" in done.stdout
    assert "loss is 0.05" in outputs_of(executed)
    cells = nbformat.read(executed, as_version=4).cells
    injected = [c for c in cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "lr = 0.25" in injected[0].source
    assert "loss is 0.05" in done.stdout  # cell output reaches the experiment's log too
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert metrics[-1]["metrics"] == {"loss": 0.05} and metrics[-1]["step"] == 5
    assert notebook.read_text().count("0.25") == 0  # the source notebook is untouched


def test_without_params_the_notebook_defaults_apply(tmp_path: Path) -> None:
    notebook = make_notebook(tmp_path / "train.ipynb", *TRAIN)
    outputs = tmp_path / "out"
    done = execute(notebook, {"KUBELAB_PARAMS": "", "KUBELAB_OUTPUTS_DIR": str(outputs)})
    assert done.returncode == 0, done.stderr
    assert "loss is 0.5" in outputs_of(outputs / "train.ipynb")


def test_a_failing_cell_exits_1_and_keeps_the_executed_notebook(tmp_path: Path) -> None:
    notebook = make_notebook(
        tmp_path / "bad.ipynb", ("code", "print('before')\nraise ValueError('boom')", [])
    )
    done = execute(notebook, {"KUBELAB_OUTPUTS_DIR": str(tmp_path / "out")})
    assert done.returncode == 1
    assert "the notebook failed: ValueError: boom" in done.stderr
    assert "before" in outputs_of(tmp_path / "out" / "bad.ipynb")


def test_bad_requests_exit_2_naming_the_problem(tmp_path: Path) -> None:
    notebook = make_notebook(tmp_path / "train.ipynb", *TRAIN)
    missing = execute(tmp_path / "nope.ipynb", {})
    assert missing.returncode == 2 and "nope.ipynb: no such notebook" in missing.stderr
    script = tmp_path / "train.py"
    script.write_text("print(1)")
    wrong = execute(script, {})
    assert wrong.returncode == 2 and "not a notebook" in wrong.stderr
    bad_json = execute(notebook, {"KUBELAB_PARAMS": "{lr: 1}", "KUBELAB_OUTPUTS_DIR": str(tmp_path / "o")})
    assert bad_json.returncode == 2 and "KUBELAB_PARAMS: not valid JSON" in bad_json.stderr
    usage = subprocess.run([sys.executable, "-m", "kubelab.papermill_run"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_parameters_must_be_an_object() -> None:
    assert parameters_from_env({"KUBELAB_PARAMS": '{"a": 1}'}) == {"a": 1}
    try:
        parameters_from_env({"KUBELAB_PARAMS": "[1, 2]"})
    except RunError as exc:
        assert str(exc) == "KUBELAB_PARAMS: must be a JSON object, not list"
    else:
        raise AssertionError("a list was accepted as parameters")


def test_run_refuses_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "x.ipynb"
    folder.mkdir()
    try:
        run(folder, {})
    except RunError as exc:
        assert "no such notebook" in str(exc)
    else:
        raise AssertionError("a directory was run as a notebook")


def test_as_an_experiment_the_executed_notebook_lands_in_the_run_directory(
    lab: Experiments, lab_env: Path
) -> None:
    notebook = make_notebook(lab_env / "train.ipynb", *TRAIN)
    record = lab.submit(
        {
            "name": "nb",
            "params": {"lr": 2, "epochs": 4},
            "command": ["python", "-m", "kubelab.papermill_run", notebook.name],
        },
        base_dir=lab_env,
    )
    final = wait_until(lab, record["id"], timeout=120)
    assert final["status"] == "Succeeded", "".join(lab.logs(record["id"]))
    assert final["metrics"] == {"loss": 0.5} and final["step"] == 4
    executed = Path(final["run_dir"]) / "outputs" / "train.ipynb"
    assert "loss is 0.5" in outputs_of(executed)
    assert "loss is 0.5" in "".join(lab.logs(record["id"]))
