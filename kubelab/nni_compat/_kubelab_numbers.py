"""What counts as a metric value, for every trial-side API: `kubelab.report`, the `nni` shim
and the Polyaxon tracking shim. Standard library only.

It lives in the shims' folder because that folder is what a trial gets on its PYTHONPATH
(on Kubernetes a copy of it in the run directory) even where kubelab is not installed, and
`kubelab.trial` imports it from the installed package as `kubelab.nni_compat._kubelab_numbers`.
"""

from __future__ import annotations

from typing import Any


def number(value: Any) -> float | int | None:
    """`value` as an int or float (numpy scalars and 0-d tensors through `.item()`), or None
    when it is not a number; a bool is not a number."""
    if hasattr(value, "item") and not isinstance(value, (int, float)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value
