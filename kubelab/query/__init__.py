"""PQL, Polyaxon's query language, over run and trial records.

`compiler` turns text into closures (`compile_query`, `select`); `parser`, `syntax`,
`literals`, `values`, `sort` and `aliases` are its parts. This package re-exports the
documented API (docs/query.md) so callers name the idea, not the file.
"""

from kubelab.query import compiler
from kubelab.query.compiler import *  # noqa: F403 (its __all__, named once there)

__all__: list[str] = []
__all__ += compiler.__all__
