"""Shared pytest setup: make `tests/` importable and register the control plane's fixtures."""

import os
import sys
from pathlib import Path

# Warm helpers (kubelab.backends.local.warm) that tests start exit soon after the test that made them. Servers
# keep no warm sweep driver here: each of the suite's many servers would import Optuna in one
# beside the test (tests/core/test_warm_pool.py turns it on where it is the subject).
os.environ.setdefault("KUBELAB_WARM_RUNNER_IDLE", "5")
os.environ.setdefault("KUBELAB_WARM_DRIVER_IDLE", "5")
os.environ.setdefault("KUBELAB_WARM_DRIVERS", "0")

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from controlplane.fixtures import (  # noqa: E402, F401
    cluster,
    kubeconfig,
    make_node,
    simulated_cluster,
)
