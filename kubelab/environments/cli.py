"""`kubelab env`: the built environments of this kubelab home, with their sizes.

kubelab env ls            # key, size, python, what defines it, runs that use it
kubelab env rm KEY...     # not while an unfinished run uses it (--force: even then)
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kubelab.cli_output import emit, grid, say
from kubelab.command_group import CommandGroup
from kubelab.environments.cache import KEY, EnvironmentCache
from kubelab.environments.definition import RECORD
from kubelab.errors import FieldError, NotFound, ValidationError
from kubelab.home import default_home
from kubelab.records import RunDirectory


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = CommandGroup(
        subparsers,
        "env",
        help="list or remove built environments",
        description="The virtualenvs runs' `environment` sections built, one per content hash.",
    ).command
    command("ls", cmd_ls, "list built environments with their sizes")
    p = command("rm", cmd_rm, "remove built environments (a later run builds its own again)")
    p.add_argument("keys", nargs="+", metavar="KEY")
    p.add_argument("--force", action="store_true", help="even while unfinished runs use it")


def runs_using(key: str) -> dict[str, bool]:
    """Run id -> finished?, for every run whose environment is `key`."""
    found = {}
    for record in (default_home() / "runs").glob(f"*/{RECORD}"):
        try:
            if json.loads(record.read_text()).get("key") != key:
                continue
            found[record.parent.name] = RunDirectory(record.parent).status().terminal
        except (OSError, ValueError):
            continue
    return found


def cmd_ls(args: argparse.Namespace) -> int:
    entries = EnvironmentCache(default_home()).entries()
    for entry in entries:
        entry["runs"] = sorted(runs_using(entry["key"]))
    if args.output == "json":
        emit({"items": entries}, "json")
        return 0
    rows: list[tuple[Any, ...]] = [("KEY", "SIZE", "PYTHON", "BUILT", "DEFINED BY", "RUNS")]
    for e in entries:
        defined = [*e["requirements"], *e["packages"], *([e["conda"]] if e["conda"] else [])]
        text = ", ".join(defined)
        rows.append(
            (e["key"], _size(e["size"]), e["python"], e["built"] or "unfinished", text[:50], len(e["runs"]))
        )
    say(grid(rows))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    cache = EnvironmentCache(default_home())
    problems = []
    for key in args.keys:
        if not KEY.match(key) or not cache.folder(key).is_dir():
            raise NotFound(f"no environment {key}: `kubelab env ls` lists them")
        busy = sorted(run for run, finished in runs_using(key).items() if not finished)
        if busy and not args.force:
            problems.append(
                FieldError("key", f"{key} is used by unfinished runs {', '.join(busy)} (--force)")
            )
    if problems:
        raise ValidationError("environments in use", problems)
    freed = {key: cache.remove(key) for key in args.keys}
    if args.output == "json":
        emit({"removed": freed}, "json")
    else:
        for key, size in freed.items():
            say(f"removed environment {key} ({_size(size)})")
    return 0


def _size(size: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000  # type: ignore[assignment]
    return str(size)
