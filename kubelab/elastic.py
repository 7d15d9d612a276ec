"""Elastic distributed PyTorch: a run that trains on between `min` and `max` replicas.

`replicas: {min: 1, max: 4}` (or `--replicas 1:4`, or `elastic: {min: 1, max: 4}`) starts every
replica as a torchrun agent (`--nnodes=MIN:MAX`, c10d rendezvous): when one is lost the others
form a smaller group and the training script starts again on it, reading its latest checkpoint
(`kubelab.latest_checkpoint()`); `WORLD_SIZE` tells it the new size. Locally the replicas are
processes (kubelab/backends/local/elastic.py); on Kubernetes a PyTorchJob's `elasticPolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, type_name
from kubelab.field_reader import about
from kubelab.spec_values import as_int

MAX_REPLICAS = 1024
# A planned shrink is a failure to the agents that stay (their workers' collectives fail), which
# spends one of torchrun's restarts: the agents get this many more than the spec's
# `max_restarts` (locally, a start that has shrunk this often is preempted whole at the next
# mark: kubelab/backends/local/resizing.py), so the user's count is left for real failures.
SHRINKS_PER_START = 8


@dataclass
class Elastic:
    """Between how many replicas an elastic run trains."""

    min: int = field(
        default=1, metadata=about("fewest replicas it trains on", minimum=1, maximum=MAX_REPLICAS)
    )
    max: int = field(
        default=1, metadata=about("most replicas; it starts with this many", minimum=1, maximum=MAX_REPLICAS)
    )
    max_restarts: int = field(
        default=3,
        metadata=about(
            "times the group forms again after losing a replica (torchrun --max-restarts)",
            minimum=0,
            maximum=100,
        ),
    )


# `replicas` may say the range itself: a number, "MIN:MAX", or {min, max}.
REPLICAS_ALSO: list[dict[str, Any]] = [
    {"type": "string", "pattern": "^[0-9]+:[0-9]+$", "description": "MIN:MAX, an elastic run"},
    {"type": "object", "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}}},
]


def read_elastic(data: dict[str, Any]) -> tuple[Elastic | None, int | None, list[FieldError]]:
    """(elastic, replicas, problems) from a spec's `replicas` and `elastic` fields.

    `replicas` is None when it is a plain number, left to the spec's own reader; 1 after a problem."""
    problems: list[FieldError] = []
    given, path = data.get("elastic"), "elastic"
    replicas = data.get("replicas")
    if isinstance(replicas, str) and ":" in replicas:
        low, _, high = replicas.partition(":")
        replicas = {"min": low.strip(), "max": high.strip()}
    if isinstance(replicas, dict):
        if given is not None:
            problems.append(FieldError("replicas", "give the range once: replicas: {min, max} or elastic"))
            return None, 1, problems
        given, path = replicas, "replicas"
    if given is None:
        return None, None, problems
    if not isinstance(given, dict):
        problems.append(FieldError(path, f"must be a mapping with min and max, not {type_name(given)}"))
        return None, 1, problems
    elastic = Elastic()
    allowed = ("min", "max", "max_restarts") if path == "elastic" else ("min", "max")
    for key in given:
        if key not in allowed:
            problems.append(FieldError(f"{path}.{key}", f"unknown field (it has {', '.join(allowed)})"))
    for key, lowest, highest in (
        ("min", 1, MAX_REPLICAS),
        ("max", 1, MAX_REPLICAS),
        ("max_restarts", 0, 100),
    ):
        value = given.get(key)
        if value is None:
            if key != "max_restarts":
                problems.append(FieldError(f"{path}.{key}", "is required for an elastic run"))
            continue
        number = as_int(value)
        if number is None or not lowest <= number <= highest:
            problems.append(
                FieldError(
                    f"{path}.{key}", f"must be a whole number from {lowest} to {highest}, not {value!r}"
                )
            )
            continue
        setattr(elastic, key, number)
    if problems:
        return None, 1, problems
    if elastic.min > elastic.max:
        problems.append(
            FieldError(f"{path}.min", f"must be at most {path}.max ({elastic.max}), not {elastic.min}")
        )
        return None, 1, problems
    plain = data.get("replicas")
    if path == "elastic" and plain is not None and as_int(plain) != elastic.max:
        problems.append(
            FieldError("replicas", f"an elastic run starts with elastic.max ({elastic.max}) replicas")
        )
    return elastic, elastic.max, problems


def elastic_problems(elastic: Elastic | None, framework: str) -> list[FieldError]:
    """What an elastic spec cannot be, beside its own fields."""
    if elastic is None or framework == "pytorch":
        return []
    return [
        FieldError(
            "framework",
            f"an elastic run (replicas min:max) trains with torchrun: framework pytorch, not {framework!r}",
        )
    ]


def parse_replicas(text: str) -> int | str:
    """`--replicas 4` or `--replicas 1:4` (elastic); a ValueError names what is wrong."""
    low, colon, high = text.partition(":")
    if colon:
        if not (low.strip().isdigit() and high.strip().isdigit()):
            raise ValueError(f"must be a whole number or MIN:MAX such as 1:4, not {text!r}")
        return text.strip()
    number = as_int(text)
    if number is None or number < 1:
        raise ValueError(f"must be a whole number of replicas (1 or more) or MIN:MAX, not {text!r}")
    return number
