"""The code a `%%train` cell runs: the cell, plus the local modules it imports.

A cell often does `from model import Net` with `model.py` next to the notebook. The run
must not depend on the notebook folder staying as it was, so the cell is snapshotted with
those files, found by reading the imports with `ast` (transitively, through the modules
found). A spec carries one script (`code.source`), so when there are local modules the
script is a small bootstrap that unpacks them and the cell (as `cell.py`, so tracebacks
show the cell's own line numbers) beside itself, then runs the cell as `__main__`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kubelab.errors import FieldError, ValidationError

LIMIT = 5 * 2**20  # bytes of local modules bundled with a cell
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".git", ".venv", "node_modules"}

BOOTSTRAP = '''\
"""kubelab: a %%train cell and the local modules it imports, unpacked beside this script."""
import os, runpy, sys, tempfile

FILES = {files!r}

here = os.path.dirname(os.path.abspath(__file__))
if not os.access(here, os.W_OK):  # a read-only code volume: unpack elsewhere
    here = tempfile.mkdtemp(prefix="kubelab-code-")
    sys.path.insert(0, here)
for name, text in FILES.items():
    path = os.path.join(here, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
sys.argv[0] = os.path.join(here, "cell.py")
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def imported_names(source: str, package: str = "") -> set[str]:
    """Dotted module names `source` imports (relative imports resolved against `package`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join(p for p in [*parts, base] if p)
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def local_modules(source: str, root: Path) -> dict[str, str]:
    """`{relative path: text}` of the `.py` files under `root` that `source` needs."""
    root = Path(root).resolve()
    found: dict[str, str] = {}
    pending = [(source, "")]
    while pending:
        text, package = pending.pop()
        try:
            names = imported_names(text, package)
        except SyntaxError:
            continue  # a module that does not parse still travels; its imports are unknown
        for name in sorted(names):
            for path in _files_for(name, root):
                rel = path.relative_to(root).as_posix()
                if rel in found:
                    continue
                found[rel] = path.read_text(encoding="utf-8", errors="replace")
                module = rel[:-3].replace("/", ".")
                pkg = (
                    module.removesuffix(".__init__")
                    if rel.endswith("__init__.py")
                    else (module.rpartition(".")[0])
                )
                pending.append((found[rel], pkg))
        if sum(len(t) for t in found.values()) > LIMIT:
            raise ValidationError(
                "the cell imports too much local code",
                [
                    FieldError(
                        "code",
                        f"local modules exceed {LIMIT // 2**20} MiB; pass a folder with code.path instead",
                    )
                ],
            )
    return found


def _files_for(name: str, root: Path) -> list[Path]:
    """The local files a dotted name stands for: each package's `__init__.py` and the module."""
    parts = name.split(".")
    files = []
    for depth in range(1, len(parts) + 1):
        base = root.joinpath(*parts[:depth])
        if any(p in SKIP_DIRS for p in parts[:depth]):
            break
        if base.with_suffix(".py").is_file():
            files.append(base.with_suffix(".py"))
            break
        init = base / "__init__.py"
        if not init.is_file():
            break
        files.append(init)
    return files


def cell_code(cell: str, root: Path) -> dict[str, str]:
    """The spec's `code` for a cell: the cell itself, or a bootstrap carrying its local modules."""
    try:
        ast.parse(cell)
    except SyntaxError as exc:
        raise ValidationError(
            "the cell is not a Python script",
            [
                FieldError(
                    "cell", f"line {exc.lineno}: {exc.msg} (magics and !commands cannot run as a script)"
                )
            ],
        ) from None
    modules = local_modules(cell, root)
    if not modules:
        return {"source": cell, "filename": "main.py"}
    files = {"cell.py": cell, **modules}
    return {"source": BOOTSTRAP.format(files=files), "filename": "main.py"}
