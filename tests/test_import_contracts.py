"""The import contract "the core imports no adapter" names its modules one by one (the adapters
live in the same `kubelab` package in the wheel); a core module left off it would go unchecked."""

from __future__ import annotations

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
