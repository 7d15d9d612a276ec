"""Polyaxon v0 groups (`kind: group` with `hptuning`) as kubelab sweep specs.

The group's experiment part (run, environment, build...) becomes the trial template,
converted exactly as a v0 experiment; `hptuning` becomes the search (see
`polyaxon_matrix`). Trials read their values as a Polyaxon experiment does: through
`{{ name }}` in `run.cmd` and the tracking client's params (`KUBELAB_PARAMS`); no
arguments are appended to the command.
"""

from __future__ import annotations

from typing import Any

from kubelab.errors import ValidationError
from kubelab.formats import polyaxon_v0 as polyaxon
from kubelab.formats.polyaxon_matrix import Matrix, search

HPTUNING = (
    "matrix",
    "concurrency",
    "seed",
    "grid_search",
    "random_search",
    "hyperband",
    "bo",
    "early_stopping",
)
ALGORITHMS = {"grid_search": "grid", "random_search": "random", "hyperband": "hyperband", "bo": "bayes"}
# Loss is what Polyaxon's examples report; a search without a metric is told which one counts.
DEFAULT_OBJECTIVE = {"metric": "loss", "direction": "minimize"}


def convert(data: dict[str, Any]) -> dict[str, Any]:
    """A v0 group -> a sweep spec mapping, or ValidationError naming every problem."""
    m = Matrix()
    hptuning = data.get("hptuning")
    if not isinstance(hptuning, dict):
        m.fail("hptuning", "is required: a mapping with matrix and a search algorithm")
        hptuning = {}
    for key in hptuning:
        if key not in HPTUNING:
            m.fail(f"hptuning.{key}", f"unknown field (known: {', '.join(HPTUNING)})")
    experiment = {k: v for k, v in data.items() if k != "hptuning"}
    experiment["kind"] = "experiment"
    trial: dict[str, Any] = {}
    try:
        trial = polyaxon.convert(experiment)
    except ValidationError as exc:
        m.errors += exc.fields
    sweep: dict[str, Any] = {"parameter_style": "env", "objective": {}}
    if data.get("name"):
        sweep["name"] = data["name"]
    sweep["space"] = m.space(hptuning.get("matrix"), "hptuning.matrix", v1=False)
    chosen = [k for k in ALGORITHMS if hptuning.get(k) is not None]
    if len(chosen) > 1:
        m.fail(f"hptuning.{chosen[1]}", f"give one search algorithm, not {' and '.join(chosen)}")
    algorithm = chosen[0] if chosen else "grid_search"  # Polyaxon's default
    settings = hptuning.get(algorithm) or {}
    if not isinstance(settings, dict):
        m.fail(f"hptuning.{algorithm}", "must be a mapping")
        settings = {}
    if hptuning.get("seed") is not None:
        settings = {**settings, "seed": hptuning["seed"]}
    search(m, ALGORITHMS[algorithm], settings, f"hptuning.{algorithm}", sweep)
    if sweep.get("tuner", {}).get("name") == "batch":
        sweep.pop("space", None)
    stop = m.stop_at(hptuning.get("early_stopping"), "hptuning.early_stopping", sweep["objective"])
    if stop is not None:
        sweep["stop_at"] = stop
    if not sweep["objective"].get("metric"):
        sweep["objective"] = dict(DEFAULT_OBJECTIVE)
    if hptuning.get("concurrency") is not None:
        sweep["concurrency"] = hptuning["concurrency"]
    fixed = sweep.pop("fixed", {})
    if fixed:
        trial["params"] = {**(trial.get("params") or {}), **fixed}
    sweep["trial"] = trial
    if m.errors:
        raise ValidationError("invalid Polyaxon group", m.errors)
    return sweep
