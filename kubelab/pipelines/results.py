"""What a finished step passes on: its outputs folder, metrics, and a sweep's best trial.

`values(...)` answers a step's pipeline templates from the records of the steps before it
(run directories and sweep ledgers, never a copy), and `cache_key(...)` digests what a
step's result depends on: its spec, the values of its templates, and the contents of
its inputs (upstream outputs folders it reads, its code), so an unchanged step can reuse
an earlier run's result.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kubelab.pipelines.references import references
from kubelab.pipelines.store import StepEntry
from kubelab.records import RunDirectory

DIGEST_LIMIT = 200 * 2**20  # bytes read to digest one input; beyond it a step is not cached


class Missing(Exception):
    """A template asks for something the step it names did not produce."""


def step_run(runs_root: Path, home: Path, entry: StepEntry) -> RunDirectory | None:
    """The run a step's results come from: its experiment, or its sweep's best trial."""
    if entry.id is None:
        return None
    if entry.kind == "experiment":
        return RunDirectory(runs_root / entry.id)
    best = sweep_best(home, entry.id)
    return RunDirectory(runs_root / best["id"]) if best and best.get("id") else None


def sweep_best(home: Path, sweep_id: str) -> dict[str, Any] | None:
    from kubelab.sweeps.store import SweepStore
    from kubelab.sweeps.sweep_record import best_trial, spec_of

    sweep = SweepStore(home).sweep(sweep_id)
    return best_trial(sweep.read_state(), spec_of(sweep)["objective"]["direction"])


def values(
    data: Any, params: dict[str, Any], entries: dict[str, StepEntry], runs_root: Path, home: Path
) -> dict[str, Any]:
    """The value of every pipeline template in `data`; raises Missing naming the first gap."""
    found: dict[str, Any] = {}
    for _, ref in references(data):
        if ref in found:
            continue
        parts = ref.split(".")
        if parts[0] == "params":
            found[ref] = params[parts[1]]
            continue
        name, what = parts[1], parts[2:]
        entry = entries[name]
        if what[:2] == ["best", "params"]:
            best = sweep_best(home, entry.id or "")
            if not best or what[2] not in best["params"]:
                raise Missing(f"{{{{ {ref} }}}}: the sweep '{name}' has no completed trial with '{what[2]}'")
            found[ref] = best["params"][what[2]]
            continue
        run = step_run(runs_root, home, entry)
        if run is None:
            raise Missing(f"{{{{ {ref} }}}}: step '{name}' has no completed run")
        if what == ["outputs"]:
            found[ref] = str(run.outputs_dir)
            continue
        metric = what[-1]
        latest, _ = run.latest_metrics()
        if metric not in latest:
            raise Missing(f"{{{{ {ref} }}}}: step '{name}' (run {run.id}) did not report '{metric}'")
        value = latest[metric]
        found[ref] = value[-1] if isinstance(value, list) and value else value
    return found


def cache_key(kind: str, spec: dict[str, Any], found: dict[str, Any], base_dir: Path) -> str | None:
    """A digest of everything the step's result depends on; None when an input is too large.

    That is the step's spec as written (templates unfilled), the values of its templates
    (`found`: pipeline params, upstream metrics, upstream outputs folders by the digest of
    their contents, never their path), and its code: `code.path`, or the folder it runs in."""
    inputs: dict[str, str] = {}
    for ref, value in found.items():
        if ref.endswith(".outputs"):
            digest = tree_digest(Path(value))
            if digest is None:
                return None
            inputs[ref] = digest
    trial = spec.get("trial") if kind == "sweep" else spec
    code = (trial or {}).get("code")
    folder = code.get("path") if isinstance(code, dict) else code if isinstance(code, str) else None
    if folder is None and not (isinstance(code, dict) and code.get("source") is not None):
        folder = (trial or {}).get("workdir") or "."
    if folder is not None:
        digest = tree_digest((base_dir / folder).resolve())
        if digest is None:
            return None
        inputs["code"] = digest
    stable = {ref: (inputs.get(ref) or value) for ref, value in found.items()}
    document = {"kind": kind, "spec": spec, "values": stable, "inputs": inputs}
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()


def tree_digest(root: Path) -> str | None:
    """sha256 over every file's relative path and contents (skipping caches and VCS folders)."""
    skip = {".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".venv", ".kubelab"}
    digest, total = hashlib.sha256(), 0
    if not root.is_dir():
        return None
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            total += path.stat().st_size
            if total > DIGEST_LIMIT:
                return None
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            with open(path, "rb") as handle:
                for block in iter(functools.partial(handle.read, 1 << 20), b""):
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()
