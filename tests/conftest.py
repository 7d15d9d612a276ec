"""Shared pytest setup: make `tests/` importable and register the Kubernetes API fixtures."""

import os
import sys
from pathlib import Path

# Warm runners (kubelab.runner_pool) that tests start exit soon after the test that made them.
os.environ.setdefault("KUBELAB_WARM_RUNNER_IDLE", "5")

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from kubeapi.fixtures import kube_api, kube_api_plain, kubeconfig  # noqa: E402, F401
