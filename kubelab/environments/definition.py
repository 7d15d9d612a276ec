"""What defines a run's environment, and its key: the hash of that content.

Read when a run is submitted (files named by the spec are read then, so a later edit of
`requirements.txt` makes a new environment for new runs and leaves older runs theirs) and
recorded in the run's `environment.json`. Two runs with the same key share one virtualenv.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kubelab.environments.spec import Environment
from kubelab.errors import FieldError

FORMAT = 1  # bump when how an environment is built changes: every key changes with it
RECORD = "environment.json"  # in the run directory
MAX_FILE = 1_000_000  # bytes of a requirements or conda file


def define(env: Environment, folder: Path) -> tuple[dict[str, Any], list[FieldError]]:
    """The definition of `env` with its files read from `folder`: (definition, problems)."""
    problems: list[FieldError] = []
    files: dict[str, str] = {}
    named = [("environment.requirements", name) for name in env.requirements]
    named += [("environment.conda", env.conda)] if env.conda else []
    root = folder.resolve()
    for field_path, name in named:
        path = (folder / name).resolve()
        if root not in path.parents:
            problems.append(FieldError(field_path, f"'{name}' is outside the run's folder"))
        elif not path.is_file():
            problems.append(FieldError(field_path, f"'{name}' does not exist in {folder.name or folder}"))
        elif path.stat().st_size > MAX_FILE:
            problems.append(FieldError(field_path, f"'{name}' is over {MAX_FILE // 1000} kB"))
        else:
            files[name] = path.read_text(errors="replace")
    links = [link if "://" in link else str((folder / link).resolve()) for link in env.find_links]
    definition = {
        "format": FORMAT,
        "python": env.python or ".".join(map(str, sys.version_info[:3])),
        "platform": f"{sys.platform}-{platform.machine()}",
        **{k: v for k, v in asdict(env).items() if k != "python"},
        "find_links": links,
        "files": files,
    }
    return definition, problems


def key_of(definition: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over the definition's canonical JSON."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_record(run_dir: Path, definition: dict[str, Any]) -> str:
    key = key_of(definition)
    (run_dir / RECORD).write_text(json.dumps({"key": key, "definition": definition}, indent=1))
    return key


def read_record(run_dir: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((run_dir / RECORD).read_text())
    except FileNotFoundError:
        return None
    return data
