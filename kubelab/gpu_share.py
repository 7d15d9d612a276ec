"""A GPU amount: whole GPUs, or 1/n of one GPU shared by n runs on this machine.

Sharing is cooperation, not isolation: runs that share a GPU see the same
`CUDA_VISIBLE_DEVICES` and are told their share in `KUBELAB_GPU_FRACTION` (a trial may call
`torch.cuda.set_per_process_memory_fraction` with it); nothing stops one from using more
memory (docs/gpus.md). Only 1/n fractions exist so that n shares fill a GPU exactly and the
ledger never strands a sliver no run can use.
"""

from __future__ import annotations

import math
from typing import Any

MAX_SHARES = 64
"""At most this many runs on one GPU (1/64)."""

FRACTION_HINT = "a whole number of GPUs, or 1/n of one GPU to share it (0.5, 0.25, ...)"


def parse_gpus(value: Any) -> tuple[float, str]:
    """(amount, "") for a valid amount: an int for whole GPUs, 1/n as a float; else (0, why)."""
    if isinstance(value, bool):
        return 0, f"must be {FRACTION_HINT}, not {value!r}"
    number: float
    if isinstance(value, (int, float)):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return 0, f"must be {FRACTION_HINT}, not {value!r}"
    else:
        return 0, f"must be {FRACTION_HINT}, not {value!r}"
    if not math.isfinite(number):
        return 0, f"must be {FRACTION_HINT}, not {value!r}"
    if number < 0:
        return 0, f"must be 0 or more, not {value}"
    if float(number).is_integer():
        return int(number), ""
    shares = shares_of(number)
    if shares is None:
        return 0, f"must be {FRACTION_HINT}, not {value}"
    return 1 / shares, ""


def shares_of(amount: float) -> int | None:
    """n when `amount` is 1/n of a GPU (within rounding: 0.33 is 1/3), else None."""
    if not 0 < amount < 1:
        return None
    shares = round(1 / amount)
    if 2 <= shares <= MAX_SHARES and abs(1 / shares - amount) <= 0.005:
        return shares
    return None


def is_fraction(amount: float) -> bool:
    return 0 < amount < 1


def parse_gpu_indices(value: Any) -> tuple[list[int], str]:
    """GPU indices as NNI writes them (`[0, 2]`, `"0,2"` or `1`), or ([], why)."""
    items: list[Any]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list):
        items = value
    else:
        items = [value]
    indices: list[int] = []
    for item in items:
        if isinstance(item, bool):
            return [], f"must list GPU indices (0, 1, ...), not {item!r}"
        try:
            index = int(item)
        except (TypeError, ValueError):
            return [], f"must list GPU indices (0, 1, ...), not {item!r}"
        if index < 0 or str(index) != str(item).strip():
            return [], f"must list GPU indices (0, 1, ...), not {item!r}"
        if index not in indices:
            indices.append(index)
    if not indices:
        return [], "must list at least one GPU index"
    return indices, ""
