"""docs/architecture.md names every module of the core, the adapters and hub_config in its map ("Where
things are"): the map is where a newcomer looks first, and a module it leaves out is one nobody finds
(issue: 13 of 29 spawner modules were unnamed). A module counts as named when its file name
(`name.py`) is in the map, not only in the prose around it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("kubelab", "spawner", "server_extension", "magics", "hub_config")
SKIP = {"nni_compat", "labextension", "node_modules", "__pycache__"}  # the shims are named as a folder


def test_every_module_is_named_in_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    page = page.split("## Where things are", 1)[1].split("```", 2)[1]  # the map's code block
    modules = [
        path
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "__init__.py" and SKIP.isdisjoint(path.relative_to(ROOT).parts)
    ]
    assert len(modules) > 150  # the walk found them
    unnamed = [
        str(path.relative_to(ROOT))
        for path in modules
        if not re.search(
            rf"(?<![\w/.-]){re.escape(path.name)}\b|\b{re.escape(str(path.relative_to(ROOT)))}\b", page
        )
    ]
    assert not unnamed, f"name these in docs/architecture.md ('Where things are'): {unnamed}"
