"""Shared pytest setup: make `tests/` importable and register the Kubernetes API fixtures."""

import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from kubeapi.fixtures import kube_api, kube_api_plain, kubeconfig  # noqa: E402, F401
