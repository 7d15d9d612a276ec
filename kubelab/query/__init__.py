"""PQL, Polyaxon's query language, over run and trial records.

`compiler` turns text into closures (`compile_query`, `select`); `parser`, `syntax`,
`literals`, `values`, `sort` and `aliases` are its parts. This package re-exports the
documented API (docs/query.md) so callers name the idea, not the file.
"""

from kubelab.query.compiler import (
    FIELDS,
    SECTIONS,
    STATUSES,
    Query,
    QueryError,
    Sort,
    compile_query,
    compile_sort,
    select,
)

__all__ = [
    "FIELDS",
    "SECTIONS",
    "STATUSES",
    "Query",
    "QueryError",
    "Sort",
    "compile_query",
    "compile_sort",
    "select",
]
