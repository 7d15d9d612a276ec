"""What differs between two runs: parameters, metrics, environment and code.

`kubelab diff A B` prints it, `GET /kubelab/api/diff?a=A&b=B` serves it for a Diff view. Code is
compared file by file between the two snapshots (`code/`): text files as unified diffs,
notebooks with nbdime (cell by cell, its JSON diff and its text rendering), binary or large
files by size only. The environment compares what `environment.json` recorded: the Python,
the packages added, removed or at another version, the GPU driver, the image, the git commit.
"""

from __future__ import annotations

import difflib
import io
from pathlib import Path
from typing import Any

from kubelab.records import RunDirectory

TEXT_LIMIT = 1 << 20  # bytes of a file compared line by line; larger ones by size
DIFF_LINES = 2000  # lines of one file's diff kept
SKIP = (".git", "__pycache__", ".ipynb_checkpoints")


def _changed(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": k, "a": a.get(k), "b": b.get(k)}
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k) or (k in a) != (k in b)
    ]


def diff_metrics(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Every metric of either run with both last values and b - a where both are numbers."""
    rows = []
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (va, vb))
        rows.append({"name": name, "a": va, "b": vb, "delta": vb - va if numbers else None})  # type: ignore[operator]
    return rows


def diff_packages(a: dict[str, str], b: dict[str, str]) -> dict[str, Any]:
    keys = {k.lower().replace("_", "-"): k for k in a}
    other = {k.lower().replace("_", "-"): k for k in b}
    return {
        "added": {other[k]: b[other[k]] for k in sorted(set(other) - set(keys))},
        "removed": {keys[k]: a[keys[k]] for k in sorted(set(keys) - set(other))},
        "changed": {
            keys[k]: [a[keys[k]], b[other[k]]]
            for k in sorted(set(keys) & set(other))
            if a[keys[k]] != b[other[k]]
        },
    }


def diff_environment(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    pa, pb = a.get("python") or {}, b.get("python") or {}
    result: dict[str, Any] = {
        "recorded": {"a": bool(a), "b": bool(b)},
        "python": {"a": pa.get("version"), "b": pb.get("version")},
        "packages": diff_packages(pa.get("packages") or {}, pb.get("packages") or {}),
    }
    for section in ("gpu", "image"):
        if a.get(section) != b.get(section):
            result[section] = {"a": a.get(section), "b": b.get(section)}
    ga, gb = a.get("git") or {}, b.get("git") or {}
    result["git"] = {
        "a": {"commit": ga.get("commit"), "dirty": ga.get("dirty")} if ga else None,
        "b": {"commit": gb.get("commit"), "dirty": gb.get("dirty")} if gb else None,
    }
    return result


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in SKIP for part in relative.parts) or path.is_symlink() or not path.is_file():
            continue
        found[relative.as_posix()] = path
    return found


def _text(path: Path) -> str | None:
    try:
        if path.stat().st_size > TEXT_LIMIT:
            return None
        data = path.read_bytes()
        return None if b"\0" in data else data.decode()
    except (OSError, UnicodeDecodeError):
        return None


def diff_code(a: Path, b: Path) -> list[dict[str, Any]]:
    """One entry per file that differs between two snapshots."""
    fa, fb = _files(a), _files(b)
    entries = []
    for name in sorted(set(fa) | set(fb)):
        pa, pb = fa.get(name), fb.get(name)
        if pa and pb and pa.read_bytes() == pb.read_bytes():
            continue
        change = "modified" if pa and pb else "added" if pb else "removed"
        entry: dict[str, Any] = {"path": name, "change": change}
        ta = "" if pa is None else _text(pa)
        tb = "" if pb is None else _text(pb)
        if ta is None or tb is None:
            sizes = [p.stat().st_size if p else None for p in (pa, pb)]
            entry["binary"] = True
            entry["text"] = f"binary or large file: {sizes[0]} -> {sizes[1]} bytes"
        elif name.endswith(".ipynb") and pa and pb:
            entry.update(_notebook_diff(ta, tb, name))
        else:
            lines = difflib.unified_diff(
                ta.splitlines(keepends=True), tb.splitlines(keepends=True), f"a/{name}", f"b/{name}"
            )
            kept = [
                line if line.endswith("\n") else line + "\n"
                for _, line in zip(range(DIFF_LINES), lines, strict=False)
            ]
            entry["text"] = "".join(kept)
        entries.append(entry)
    return entries


def _notebook_diff(a: str, b: str, name: str) -> dict[str, Any]:
    """nbdime's cell-aware diff of two notebooks (its JSON, and its text as `nbdiff` prints it)."""
    import nbformat
    from nbdime import diff_notebooks
    from nbdime.prettyprint import PrettyPrintConfig, pretty_print_diff

    try:
        na = nbformat.reads(a, as_version=4)
        nb = nbformat.reads(b, as_version=4)
    except Exception as exc:  # not a notebook after all: nbformat's many errors
        return {"text": f"not a readable notebook ({exc})"}
    diff = diff_notebooks(na, nb)
    out = io.StringIO()
    pretty_print_diff(na, diff, name, PrettyPrintConfig(out=out, use_color=False, use_git=False))
    return {"notebook": True, "nbdime": diff, "text": out.getvalue()}


def diff_runs(a: RunDirectory, b: RunDirectory, ra: dict[str, Any], rb: dict[str, Any]) -> dict[str, Any]:
    """The whole comparison of two runs (`ra`, `rb`: their records)."""
    return {
        "a": {k: ra.get(k) for k in ("id", "name", "status")},
        "b": {k: rb.get(k) for k in ("id", "name", "status")},
        "params": _changed(ra.get("params") or {}, rb.get("params") or {}),
        "metrics": diff_metrics(ra.get("metrics") or {}, rb.get("metrics") or {}),
        "environment": diff_environment(a.environment(), b.environment()),
        "code": diff_code(a.code_dir, b.code_dir),
    }
