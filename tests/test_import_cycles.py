"""No two modules of kubelab's packages import each other, directly or round a loop.

A loop hides which idea stands on which (docs/architecture.md draws the layers); lazy imports
inside functions count, since they run. Imports under `if TYPE_CHECKING:` do not: they never
run. Read from the source with `ast`, so the check needs no import of anything it checks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folder -> module prefix, as the wheel lays them out (pyproject.toml's package-dir).
PACKAGES = {
    "kubelab": "kubelab",
    "magics": "kubelab.magics",
    "server_extension": "kubelab.server_extension",
    "spawner": "kubelab.spawner",
}


def module_files() -> dict[str, Path]:
    found = {}
    for folder, prefix in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "labextension" in parts or "node_modules" in parts or "nni_compat" in parts:
                continue  # the shims import each other by their top-level names, on a trial's path
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((prefix, *parts))] = path
    return found


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that the module `name` imports at run time."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            for child in getattr(node, "orelse", []):
                visit(child)
            return
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from pkg import module` names a module
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {t for t in targets if t in modules and t != name}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def test_no_module_imports_round_a_loop() -> None:
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 200  # the walk read the tree
    found = loops(graph)
    assert not found, "modules that import each other (move what both need below them): " + "; ".join(
        " <-> ".join(loop) for loop in found
    )


def test_the_check_finds_a_loop() -> None:
    """The same walk, on a graph with a loop made on purpose, says so."""
    graph = import_graph()
    graph["kubelab.errors"] = graph["kubelab.errors"] | {"kubelab.experiments"}
    assert any("kubelab.errors" in loop and "kubelab.experiments" in loop for loop in loops(graph))
