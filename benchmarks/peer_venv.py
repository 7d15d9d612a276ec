"""A peer (NNI, ...) in a virtualenv of its own beside kubelab's, made once and kept.

Peers are measured as their users run them, never imported into kubelab's environment
(kubelab's own `nni` compatibility package would shadow the real one there). The venv is
`.cache/bench-peers/<name>/`, installed from the pinned `benchmarks/peers/<name>.txt`; a
change to that file makes it anew. What happens is said on stderr.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "benchmarks" / "peers"
CACHE = ROOT / ".cache" / "bench-peers"


def peer_python(name: str) -> Path:
    """The Python of `name`'s venv, installing it first when missing or out of date."""
    requirements = PEERS / f"{name}.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    venv = CACHE / name
    python = venv / "bin" / "python"
    stamp = venv / "installed-from"
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        print(f"# peer {name}: {venv} (cached)", file=sys.stderr, flush=True)
        return python
    print(f"# peer {name}: installing {requirements.name} into {venv} (once)", file=sys.stderr, flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", str(requirements)],
        check=True,
    )
    stamp.write_text(digest)
    return python


def overlay(name: str) -> Path:
    """A folder holding the pinned `benchmarks/peers/<name>.txt` alone (`pip install --target
    --no-deps`), made once: on PYTHONPATH, kubelab's own environment plus those packages.

    For what depends on a package merely being installed beside kubelab (scikit-learn:
    Optuna imports it whenever `optuna.importance` is imported), without a second copy of
    kubelab's environment.
    """
    requirements = PEERS / f"{name}.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    target = CACHE / f"{name}-overlay"
    stamp = target / ".installed-from"
    if stamp.exists() and stamp.read_text() == digest:
        print(f"# overlay {name}: {target} (cached)", file=sys.stderr, flush=True)
        return target
    print(f"# overlay {name}: installing {requirements.name} into {target} (once)", file=sys.stderr)
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
        + ["--target", str(target), "-r", str(requirements)],
        check=True,
    )
    stamp.write_text(digest)
    return target
