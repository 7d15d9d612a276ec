"""Test tiers: `pytest -m fast` (under a minute) and `pytest -m slow` (real servers, hubs,
browsers, clusters, trial processes).

A module is in the fast tier when it is listed in FAST_MODULES: its tests call pure code
(parsers, builders, the query language, validation) and start no process that outlives a
call. Everything else is slow, and so is a test in a fast module that is marked
`@pytest.mark.slow` or `@pytest.mark.cluster` or uses the control plane's fixtures. Loaded by `-p tiers` in pyproject.toml's pytest options.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLUSTER_FIXTURES = frozenset({"cluster", "kubeconfig", "simulated_cluster", "make_node"})

FAST_MODULES = frozenset(
    {
        "test_query.py",
        "core/test_spec.py",
        "environments/test_environment_spec.py",
        "core/test_index.py",
        "core/test_run_record.py",
        "core/test_options.py",
        "core/test_vocabulary.py",
        "core/test_run_timeline.py",
        "kube/test_kube_builders.py",
        "kube/test_image_build.py",
        "kube/test_kube_serving_builders.py",
        "kube/test_kube_gpu_request.py",
        "kube/test_kube_dra_builders.py",
        "kube/test_kube_elastic_sizing.py",
        "test_module_size.py",
        "test_import_cycles.py",
        "test_import_contracts.py",
        "test_backend_seam.py",
        "test_architecture_map.py",
        "sweeps/test_space.py",
        "sweeps/test_sweep_spec.py",
        "sweeps/test_population.py",
        "serving/test_service_spec.py",
        "serving/test_traffic_stats.py",
        "sweeps/test_nni.py",
        "sweeps/test_validation_without_optuna.py",
        "spawner/test_spawner_options.py",
        "spawner/test_shared_gpu_catalog.py",
        "spawner/test_namespace_bounds_config.py",
        "spawner/test_storage_layout.py",
        "notebook/test_magics_plain.py",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fast: pure tests; `pytest -m fast` runs them in under a minute")
    config.addinivalue_line("markers", "slow: starts servers, hubs, browsers, clusters or trials")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            module = item.path.resolve().relative_to(TESTS).as_posix()
        except ValueError:
            continue
        heavy = (
            item.get_closest_marker("slow") is not None
            or item.get_closest_marker("cluster") is not None
            or not CLUSTER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
        )
        if module in FAST_MODULES and not heavy:
            item.add_marker(pytest.mark.fast)
        elif item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
