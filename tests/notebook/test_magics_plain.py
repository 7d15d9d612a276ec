"""The magics without a server (plain IPython, as the CLI), the cell snapshot, option parsing."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from kubelab.magics import options
from kubelab.magics.snapshot import cell_code, local_modules

SCRIPT = textwrap.dedent('''\
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    cells = [
        "%load_ext kubelab",
        """%%train --name plain --wait -P lr=0.25
    import kubelab
    from helpers import scaled
    kubelab.report(step=0, loss=scaled(kubelab.params()["lr"]))
    print("ran in", __file__.rsplit("/", 1)[-1])
    """,
        "%experiments status:succeeded",
        "%gpus",
        "%%train --gpus -3\\npass",
    ]
    for cell in cells:
        print(f"--- {cell.splitlines()[0]}", flush=True)
        shell.run_cell(cell)
''')


def test_plain_ipython_without_a_server_prints_text(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text(
        "from util.numbers import double\n\ndef scaled(x):\n    return double(x)\n"
    )
    (tmp_path / "util").mkdir()
    (tmp_path / "util" / "__init__.py").write_text("")
    (tmp_path / "util" / "numbers.py").write_text("def double(x):\n    return 2 * x\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBELAB_API")}
    env.update(
        KUBELAB_HOME=str(tmp_path / "home"),
        KUBELAB_MACHINE_DIR=str(tmp_path / "machine"),
        KUBELAB_FAKE_GPUS="T4",
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    out = done.stdout + done.stderr
    train = out.split("--- %%train --name plain")[1].split("--- %experiments")[0]
    assert "submitted" in train and "ran in cell.py" in train, out  # logs followed, then the result
    assert "plain  Succeeded" in train and "loss=0.5" in train, out
    table = out.split("--- %experiments")[1].split("--- %gpus")[0]
    assert "plain" in table and "Succeeded" in table and "<table" not in table
    assert "GPUs: 1 free of 1" in out and "T4: 1/1 free" in out
    assert "UsageError: %train: argument --gpus: must be 0 or more, not -3" in out


def test_snapshot_finds_local_imports_transitively(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("from . import nothing\nimport layers\nimport os\n")
    (tmp_path / "layers.py").write_text("X = 1\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .sub import y\n")
    (tmp_path / "pkg" / "sub.py").write_text("y = 2\n")
    (tmp_path / "unused.py").write_text("")
    found = local_modules("import model\nfrom pkg import sub\nimport numpy\n", tmp_path)
    assert sorted(found) == ["layers.py", "model.py", "pkg/__init__.py", "pkg/sub.py"]
    assert cell_code("print(1)\n", tmp_path) == {"source": "print(1)\n", "filename": "main.py"}


def test_bootstrap_unpacks_the_modules_and_runs_the_cell(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "helper.py").write_text("VALUE = 41\n")
    code = cell_code("import sys\nfrom helper import VALUE\nprint(VALUE + 1, __name__)\n", tmp_path / "src")
    run = tmp_path / "run"
    run.mkdir()
    (run / code["filename"]).write_text(code["source"])
    done = subprocess.run(
        [sys.executable, code["filename"]], cwd=run, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "42 __main__", done.stderr
    assert sorted(p.name for p in run.iterdir()) == ["cell.py", "helper.py", "main.py"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "--gpus two",
            "must be a whole number of GPUs, or 1/n of one GPU to share it (0.5, 0.25, ...), not 'two'",
        ),
        ("--wait --detach", "not allowed with argument"),
        ("--framework jax", "must be one of none, pytorch, tensorflow, paddle, keras, scikit-learn"),
        ("-P lr", "must be NAME=VALUE, not 'lr'"),
        ("--name 'unclosed", "cannot read the options"),
        ("extra", "unexpected argument 'extra'"),
        ("--early-stop sometimes", "invalid choice: 'sometimes'"),
    ],
)
def test_option_errors_name_the_option(line: str, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        options.train_parser().read(line)
    assert message in str(caught.value) and "usage: train" in str(caught.value)


def read(parser: options.MagicParser, line: str) -> argparse.Namespace:
    args = parser.read(line)
    assert args is not None
    return args


def test_tensorboard_options_need_exactly_one_target() -> None:
    parser = options.tensorboard_parser()
    assert options.tensorboard_request(parser, read(parser, "a b")) == {"experiments": ["a", "b"]}
    assert options.tensorboard_request(parser, read(parser, "--query 'status:failed'")) == {
        "query": "status:failed"
    }
    with pytest.raises(UsageError, match="exactly one"):
        options.tensorboard_request(parser, read(parser, "a --project"))
