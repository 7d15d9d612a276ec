"""`%%train` and `%sweep`: options and a cell become an experiment spec or a sweep spec.

Specs are validated here, in the kernel, with the same parsers the server uses, so a typo
is reported under the cell with the option it came from and nothing is submitted.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from kubelab.errors import FieldError, ValidationError
from kubelab.magics.snapshot import cell_code


def default_name() -> str:
    """The notebook's name (Jupyter tells kernels which notebook they belong to), or `cell`."""
    session = os.environ.get("JPY_SESSION_NAME", "")
    stem = Path(session).stem if session.endswith(".ipynb") else ""
    return stem or "cell"


def overrides(args: argparse.Namespace, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with what the options say laid over it, exactly as `kubelab run` does."""
    from kubelab.options import apply_options

    return apply_options(spec, args)


def experiment_from_cell(args: argparse.Namespace, cell: str, cwd: Path) -> dict[str, Any]:
    spec = overrides(args, {"name": default_name(), "code": cell_code(cell, cwd)})
    return checked(spec)


def experiment_from_file(args: argparse.Namespace) -> tuple[dict[str, Any], Path]:
    from kubelab.formats import load_spec_file

    spec = overrides(args, load_spec_file(args.file))
    return checked(spec), Path(args.file).resolve().parent


def checked(spec: dict[str, Any]) -> dict[str, Any]:
    """Validate now (pure; no paths touched) so mistakes never reach the server."""
    from kubelab.spec import ExperimentSpec

    ExperimentSpec.parse(spec)
    return spec


def sweep_from_cell(
    args: argparse.Namespace, cell: str, cwd: Path, namespace: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A sweep whose trials run the cell; parameters reach it through `kubelab.params()`.

    `--sweep` names a file, a notebook variable holding the space, or the space inline.
    """
    from kubelab.sweeps.config_files import read_document

    held = (namespace or {}).get(args.sweep) if args.sweep.isidentifier() else None
    if isinstance(held, dict):
        space = held
    else:
        space, _ = read_document(_space_source(args.sweep, cwd), "sweep")
    if not isinstance(space, dict):
        raise ValidationError(
            "invalid search space",
            [FieldError("sweep", "must be a mapping of parameter names to {_type, _value}")],
        )
    trial = experiment_from_cell(args, cell, cwd)
    sweep: dict[str, Any] = {
        "name": trial["name"],
        "space": space,
        "trial": trial,
        "parameter_style": "env",
        "objective": {
            "metric": args.objective or "default",
            "direction": "maximize" if args.maximize else "minimize",
        },
    }
    if args.tuner:
        sweep["tuner"] = args.tuner
    if args.trials:
        sweep["max_trials"] = args.trials
    if args.concurrency:
        sweep["concurrency"] = args.concurrency
    if args.early_stop:
        sweep["early_stopping"] = args.early_stop
    return checked_sweep(sweep, cwd)


def _space_source(text: str, cwd: Path) -> str:
    """A file (relative to the notebook's folder) or the inline document itself."""
    candidate = (cwd / text).expanduser()
    looks_inline = text.lstrip().startswith(("{", "[")) or "\n" in text or ": " in text
    if not looks_inline:
        if candidate.is_file():
            return str(candidate)
        raise ValidationError("cannot read the search space", [FieldError("sweep", f"no such file: {text}")])
    return text


def sweep_from_file(path: str) -> tuple[dict[str, Any], Path]:
    """A kubelab sweep file, or an NNI `config.yml` (converted)."""
    from kubelab.formats.specfile import load_document

    data = load_document(path, "file")
    base = Path(path).resolve().parent
    if isinstance(data, dict) and (
        "trialCommand" in data or "searchSpace" in data or "searchSpaceFile" in data
    ):
        from kubelab.formats.nni_config import nni_to_sweep

        data = nni_to_sweep(data, base_dir=base)
    if not isinstance(data, dict):
        raise ValidationError(f"{path} is not a sweep", [FieldError("file", "must hold a mapping")])
    return checked_sweep(data, base), base


def checked_sweep(sweep: dict[str, Any], base: Path) -> dict[str, Any]:
    from kubelab.sweeps.sweep_spec import SweepSpec

    SweepSpec.parse(sweep, base_dir=base)
    return sweep
