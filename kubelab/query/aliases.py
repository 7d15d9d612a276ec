"""Polyaxon's names for query fields, so PQL written for Polyaxon runs unchanged.

Polyaxon calls a run's id `uuid`, its params `in.*`/`inputs.*` and what it reported
`outputs.*`; they mean kubelab's `id`, `params.*` and `metrics.*`. Standard library only,
like the parser that uses it on listing hot paths.
"""

from __future__ import annotations

FIELD_ALIASES = {"uuid": "id"}
PREFIX_ALIASES = (("inputs.", "params."), ("in.", "params."), ("outputs.", "metrics."))


def canonical_field(name: str) -> str:
    """kubelab's name for a field written with one of Polyaxon's names (others unchanged)."""
    if name in FIELD_ALIASES:
        return FIELD_ALIASES[name]
    for alias, section in PREFIX_ALIASES:
        if name.startswith(alias):
            return section + name[len(alias) :]
    return name
