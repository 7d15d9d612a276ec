"""Services hold a `Backend` and never ask which one: no code outside `kubelab/backends/` names a
concrete backend class, compares a backend's name or tests its type. What only some backends can
do is a hook on `Backend` (docs/architecture.md, "Adding a backend"); import-linter checks the
imports, this reads the source for the checks import-linter cannot see."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("kubelab", "server_extension", "magics", "spawner", "hub_config")
SEAM = ROOT / "kubelab" / "backends"

CHECKS = {
    "names a concrete backend class": re.compile(r"\b(?:Local|Kubernetes)Backend\b"),
    "tests a backend's type": re.compile(r"isinstance\([^()]*,\s*\(?[\w., ]*Backend\b"),
    "compares a backend's name": re.compile(
        r"backend\w*(?:\(\))?(?:\.name)?\s*(?:==|!=|\bin\b|\bnot in\b)\s*[(\[{]?\s*[\"']"
        r"|[\"']\s*(?:==|!=)\s*[\w.]*backend\w*(?:\.name)?\b"
        r"|KUBELAB_BACKEND[\"']?\s*(?:\)|\])?\s*(?:==|!=|\bin\b)",
        re.IGNORECASE,
    ),
}


def core_files() -> list[Path]:
    files = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if SEAM in path.parents or "node_modules" in parts or "labextension" in parts:
                continue
            files.append(path)
    return files


def findings(text: str) -> list[str]:
    return [what for what, pattern in CHECKS.items() if pattern.search(text)]


def test_the_checks_catch_what_they_are_for() -> None:
    """Each pattern finds the code this seam replaced (else the scan below proves nothing)."""
    assert findings("from kubelab.backends.kubernetes.backend import KubernetesBackend") == [
        "names a concrete backend class"
    ]
    assert "tests a backend's type" in findings("assert isinstance(backend, SlurmBackend)")
    for line in (
        'if backend.name != "kubernetes":',
        'if self.lab.backend.name == "local":',
        'if args.backend == "kubernetes":',
        'if backend.name in ("local", "slurm"):',
        'if "kubernetes" == self.backend.name:',
        'if os.environ.get("KUBELAB_BACKEND") == "kubernetes":',
        'if os.environ["KUBELAB_BACKEND"] in ("a", "b"):',
    ):
        assert findings(line) == ["compares a backend's name"], line
    assert not findings('status = Status(backend=self.backend.name, user="x")')
    assert not findings('if str(platform).lower() != "local":')  # NNI's platform, not a backend


def test_no_service_or_adapter_asks_which_backend_it_holds() -> None:
    files = core_files()
    assert len(files) > 100  # the walk found the core and the adapters
    offences = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            offences += [
                f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}" for what in findings(line)
            ]
    assert not offences, "use a hook on Backend (kubelab/backends/base.py) instead:\n" + "\n".join(offences)
