"""`python -m kubelab.papermill_run NOTEBOOK`: a notebook as an experiment, run headless.

The sidebar's "Run as experiment" on a `.ipynb` submits this command. Papermill executes
the notebook top to bottom with the experiment's parameters (`KUBELAB_PARAMS`) injected
after the cell tagged `parameters`, and saves the executed copy, outputs included, as
`$KUBELAB_OUTPUTS_DIR/<notebook name>.ipynb` in the run directory, where the experiment
view opens it. Cell outputs also go to stdout, so they show up in the experiment's logs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

USAGE = "usage: python -m kubelab.papermill_run NOTEBOOK.ipynb"


class RunError(Exception):
    """A problem with the request itself (not with the notebook's code): exit code 2."""


def parameters_from_env(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """The experiment's parameters, as the runner exported them."""
    raw = environ.get("KUBELAB_PARAMS") or "{}"
    try:
        params = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RunError(f"KUBELAB_PARAMS: not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(params, dict):
        raise RunError(f"KUBELAB_PARAMS: must be a JSON object, not {type(params).__name__}")
    return params


def output_path(notebook: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """Where the executed copy goes: the run's outputs folder, or next to the cwd outside a run."""
    folder = Path(environ.get("KUBELAB_OUTPUTS_DIR") or Path.cwd() / "outputs")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / notebook.name


def run(notebook: Path, environ: Mapping[str, str] = os.environ) -> Path:
    """Execute `notebook` with the parameters from the environment; returns the output path.

    Raises `RunError` for a missing or unreadable notebook, and papermill's
    `PapermillExecutionError` when a cell fails (the output notebook is saved first, so the
    traceback can be read in it).
    """
    import papermill

    if notebook.suffix != ".ipynb":
        raise RunError(f"{notebook}: not a notebook (expected a .ipynb file)")
    if not notebook.is_file():
        raise RunError(f"{notebook}: no such notebook")
    params = parameters_from_env(environ)
    target = output_path(notebook, environ)
    papermill.execute_notebook(
        str(notebook),
        str(target),
        parameters=params,
        cwd=str(notebook.parent.resolve()),
        log_output=True,
        progress_bar=False,
        stdout_file=sys.stdout,
        stderr_file=sys.stderr,
    )
    return target


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        target = run(Path(args[0]))
    except RunError as exc:
        print(f"kubelab.papermill_run: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # papermill's execution error: the notebook's own failure
        if type(exc).__name__ != "PapermillExecutionError":
            raise
        failure = f"{getattr(exc, 'ename', '')}: {getattr(exc, 'evalue', '')}"  # papermill is untyped
        print(f"kubelab.papermill_run: the notebook failed: {failure}", file=sys.stderr)
        return 1
    print(f"kubelab.papermill_run: executed notebook saved to {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
