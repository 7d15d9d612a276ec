"""`nni.utils` as NNI trial code uses it: `merge_parameter`, `OptimizeMode`, `extract_scalar_reward`."""

from __future__ import annotations

from enum import Enum
from typing import Any


class OptimizeMode(Enum):
    Minimize = "minimize"
    Maximize = "maximize"


def merge_parameter(base_params: Any, override_params: dict[str, Any] | None) -> Any:
    """Overwrite `base_params` (an argparse Namespace, any object, or a dict) with the tuner's values.

    As in NNI: every overriding name must already exist in the base (a typo in the search
    space is an error, not a silently unused value), and its value must have the base
    value's type (an int may stand for a float). Returns `base_params`, changed in place.
    """
    if override_params is None:
        return base_params
    is_dict = isinstance(base_params, dict)
    for key, value in override_params.items():
        present = key in base_params if is_dict else hasattr(base_params, key)
        if not present:
            raise ValueError(f"Key '{key}' not found in base parameters.")
        current = base_params[key] if is_dict else getattr(base_params, key)
        value = _compatible(key, current, value)
        if is_dict:
            base_params[key] = value
        else:
            setattr(base_params, key, value)
    return base_params


def _compatible(key: str, current: Any, value: Any) -> Any:
    if current is None or isinstance(value, type(current)):
        return value
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    raise ValueError(
        f"Expected '{key}' in override parameters to have type '{type(current).__name__}', "
        f"but found '{type(value).__name__}'."
    )


def extract_scalar_reward(value: Any, scalar_key: str = "default") -> float:
    """The objective of a reported result: the number itself, or a dict's `default` entry."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    scalar = value.get(scalar_key) if isinstance(value, dict) else None
    if isinstance(scalar, (int, float)):
        return scalar
    raise RuntimeError(
        f"Incorrect final result: the final result should be float/int, or a dict "
        f"which has a key named '{scalar_key}' whose value is float/int."
    )
