"""Reopen a run: its code snapshot as a new folder, its parameters filled in, its lineage kept.

`kubelab reopen RUN DEST` (and `POST /kubelab/api/experiments/RUN/reopen`) copies the run's
`code/` to DEST. A notebook the command runs gets the run's parameters as papermill does it:
an `injected-parameters` cell after the cell tagged `parameters` (papermill's own
`parameterize_notebook`). Otherwise the parameters go into `kubelab-run.yaml`, a spec that
starts the same command again (`kubelab run -f DEST/kubelab-run.yaml`). Either way DEST holds
`.kubelab/parent.json`, and a run started from DEST (its code folder or working directory)
records that run as its `parent` (the snapshot leaves `.kubelab/` out).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError
from kubelab.records import RunDirectory

SPEC_FILE = "kubelab-run.yaml"
MARKER = Path(".kubelab") / "parent.json"
RUN_ID = re.compile(r"^[0-9a-z]{12}$")
# What a reopened spec leaves out: where the old run's code lived, and what it was named as a result.
DROPPED = ("workdir", "code", "inputs")


def parent_of(folder: Path | None) -> str | None:
    """The run a folder was reopened from (its `.kubelab/parent.json`), or None."""
    if folder is None:
        return None
    try:
        data = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    parent = data.get("parent") if isinstance(data, dict) else None
    return parent if isinstance(parent, str) and RUN_ID.match(parent) else None


def notebooks_in(command: Any) -> list[str]:
    """The `.ipynb` files a command names (the sidebar's notebook runs name one)."""
    words = command if isinstance(command, list) else str(command or "").split()
    return [w for w in words if isinstance(w, str) and w.endswith(".ipynb")]


def check_destination(dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        reason = f"'{dest}' already exists and is not an empty folder"
        raise ValidationError("invalid destination", [FieldError("dest", reason)])


def reopen(run: RunDirectory, params: dict[str, Any], dest: Path) -> dict[str, Any]:
    """Copy `run`'s snapshot to `dest` with `params` filled in; what was written, for the caller."""
    if not run.code_dir.is_dir():
        reason = f"run {run.id} has no code snapshot (it ran in a folder: {run.spec().get('workdir')})"
        raise ValidationError("cannot reopen", [FieldError("id", reason)])
    check_destination(dest)
    spec = run.spec()
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(run.code_dir, dest, symlinks=True, dirs_exist_ok=True)
    filled = [n for n in notebooks_in(spec.get("command")) if _parameterize(dest / n, params)]
    reopened = {k: v for k, v in spec.items() if k not in DROPPED and v not in (None, "", [], {})}
    reopened["resources"] = {k: v for k, v in (spec.get("resources") or {}).items() if v is not None}
    reopened["code"] = {"path": "."}
    reopened["params"] = {} if filled else params
    reopened["name"] = f"{spec.get('name') or run.id} (reopened)"[:200]
    import yaml

    header = f"# Reopened from run {run.id}: kubelab run -f {SPEC_FILE}\n"
    (dest / SPEC_FILE).write_text(header + yaml.safe_dump(reopened, sort_keys=False))
    (dest / MARKER).parent.mkdir(exist_ok=True)
    (dest / MARKER).write_text(json.dumps({"parent": run.id}))
    return {"id": run.id, "dest": str(dest), "spec_file": SPEC_FILE, "notebooks": filled, "params": params}


def _parameterize(notebook: Path, params: dict[str, Any]) -> bool:
    """Write `params` into the notebook as papermill's injected-parameters cell; False if it
    cannot be (no such notebook, no parameters, not a readable notebook)."""
    if not notebook.is_file() or not params:
        return False
    import nbformat
    from papermill.iorw import load_notebook_node  # gives every cell the tags papermill reads
    from papermill.parameterize import parameterize_notebook

    try:
        nb = load_notebook_node(str(notebook))
    except Exception:  # nbformat's and json's many ways of saying "not a notebook"
        return False
    language = (nb.metadata.get("kernelspec") or {}).get("language") or "python"
    nb = parameterize_notebook(nb, params, language=language, kernel_name="python3")
    nbformat.write(nb, notebook)
    return True
