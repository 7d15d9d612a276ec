"""The import contract "the core imports no adapter" names its modules one by one (the adapters
live in the same `kubelab` package in the wheel); a core module left off it would go unchecked.
The shims are outside import-linter's root package (top-level on a trial's path): read here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_core_module_is_under_the_core_contract() -> None:
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+; kubelab supports 3.10)
    contract = text.split('name = "The core imports no adapter"', 1)[1]
    listed = set(re.findall(r'"([\w.]+)"', contract.split("source_modules", 1)[1].split("]", 1)[0]))
    core = {f"kubelab.{p.stem}" for p in (ROOT / "kubelab").glob("*.py") if p.stem != "__init__"}
    core |= {f"kubelab.{p.name}" for p in (ROOT / "kubelab").iterdir() if (p / "__init__.py").is_file()}
    assert len(core) > 25  # the walk found the core
    missing = sorted(core - listed)
    assert not missing, f"add to the core contract in pyproject.toml: {missing}"


def _kubelab_imports(tree: ast.AST) -> list[ast.stmt]:
    found: list[ast.stmt] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Import)
            and any(a.name.split(".")[0] == "kubelab" for a in node.names)
            or isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] == "kubelab"
        ):
            found.append(node)
    return found


def test_what_a_trial_imports_of_the_shims_imports_nothing_of_kubelab() -> None:
    """The shims run in images without kubelab; only `nni.experiment` (run where a sweep is
    started, never in a trial) imports kubelab, and only inside its methods (docs/architecture.md)."""
    shims = ROOT / "kubelab" / "nni_compat"
    starter = shims / "nni" / "experiment" / "__init__.py"
    files = sorted(shims.rglob("*.py"))
    assert len(files) > 5 and starter in files
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if path == starter:
            assert _kubelab_imports(tree), "the sweep starter imports the services it starts"
            top_level = [n for n in tree.body if n in _kubelab_imports(tree)]
            assert not top_level, f"{path}: imports kubelab at module level"
        else:
            assert not _kubelab_imports(tree), f"{path.relative_to(ROOT)} imports kubelab"
