"""DRA selectors (CEL) as the hub evaluates them: shapes from the Kubernetes DRA documentation
run against a device as its driver's ResourceSlice writes it; what kubelab cannot bind
faithfully (capacity quantities, versions), a device lacking an attribute, and expressions that
are not CEL or not boolean give None (the form's "free count unknown"), never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from kubelab.backends.kubernetes.gpu_request import SharedType
from kubelab.spawner.dra_availability import Device, DraCount, dra_counts, matches
from kubelab.spawner.dra_cel import program

DRIVER = "gpu.example.com"
A100 = Device(
    DRIVER,
    "node-1",
    "gpu-0",
    {
        "model": {"string": "A100-SXM4-80GB"},
        "memoryGiB": {"int": 80},
        "mig": {"bool": False},
        "driverVersion": {"version": "550.54.15"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
    },
)
OWN = f'device.attributes["{DRIVER}"]'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f'device.driver == "{DRIVER}"', True),
        (f'{OWN}.model == "H100" || {OWN}.model.startsWith("A100")', True),
        (f'{OWN}.model in ["H100-SXM5-80GB", "H200"]', False),
        (f'{OWN}.model.matches("^A100-(PCIE|SXM4)-[0-9]+GB$")', True),
        (f"{OWN}.memoryGiB >= 40 && !{OWN}.mig", True),
        ('"pcieRoot" in device.attributes["resource.kubernetes.io"]', True),
        (f'device.driver != "{DRIVER}" && {OWN}.nothing == 1', False),  # short-circuits as CEL does
        (f'{OWN}.model.endsWith("80GB") ? {OWN}.memoryGiB == 80 : false', True),
    ],
)
def test_selectors_from_the_kubernetes_docs_are_evaluated(expression: str, expected: bool) -> None:
    assert matches(expression, A100) is expected


@pytest.mark.parametrize(
    "expression",
    [
        f'{OWN}.driverVersion.isGreaterThan(semver("535.0.0"))',  # a version: not bound
        f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',  # a quantity
        f"{OWN}.nothing == 1",  # an attribute the device lacks: the scheduler's runtime error
        f'{OWN}.model == "A100" &&',  # not CEL
        f'{OWN}.model == "A100" ) || (',
        f"{OWN}.model",  # not boolean
        "device.allowMultipleAllocations",
        "",
    ],
)
def test_what_kubelab_cannot_evaluate_is_unknown_never_an_error(expression: str) -> None:
    assert matches(expression, A100) is None


def test_a_type_with_an_unevaluable_selector_has_no_free_count_and_a_program_is_compiled_once() -> None:
    slices: list[dict[str, Any]] = [
        {
            "spec": {
                "driver": DRIVER,
                "pool": {"name": "node-1", "generation": 1},
                "devices": [
                    {"name": "gpu-0", "attributes": {"model": {"string": "A100"}}},
                    {"name": "gpu-1", "attributes": {"model": {"string": "H100"}}},
                ],
            }
        }
    ]
    types = [
        SharedType("either", "a", "r", "dra", DRIVER, f'{OWN}.model in ["A100", "H100"]'),
        SharedType("broken", "b", "r", "dra", DRIVER, f"{OWN}.model ==="),
    ]
    classes = {DRIVER: [f'device.driver == "{DRIVER}" || device.driver.startsWith("legacy.")']}
    program.cache_clear()
    for _ in range(3):
        counts = dra_counts(types, classes, slices, [])
    assert counts == {"either": DraCount(2, 2), "broken": DraCount(2, None)}
    assert program.cache_info().misses == 3  # the class's selector and each type's, once each
