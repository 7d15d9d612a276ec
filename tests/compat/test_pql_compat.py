"""Polyaxon's query language as its users write it: aliases, spaced `|`, values with `:`,
and `kubelab ls ... --sort -metrics.loss` exactly as the README shows it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from kubelab.cli import dash_values
from kubelab.query import QueryError, select

RECORDS = [
    {
        "id": "aaa",
        "name": "train run:1",
        "status": "Stopped",
        "params": {"activation": "relu", "lr": 0.1},
        "metrics": {"loss": 0.3},
        "tags": [],
    },
    {
        "id": "bbb",
        "name": "x",
        "status": "Running",
        "params": {"activation": "tanh", "lr": 0.01},
        "metrics": {"loss": 0.1},
        "tags": [],
    },
    {
        "id": "ccc",
        "name": "url",
        "status": "Succeeded",
        "params": {"data": "s3://bucket/a"},
        "metrics": {"loss": 0.2},
        "tags": [],
    },
]


def ids(query: str, sort: str = "") -> list[str]:
    return [r["id"] for r in select(RECORDS, query, sort)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("in.activation:relu", ["aaa"]),
        ("inputs.lr:<0.05", ["bbb"]),
        ("outputs.loss:<=0.2", ["bbb", "ccc"]),
        ("uuid:bbb", ["bbb"]),
        ("uuid:aaa|ccc", ["aaa", "ccc"]),
        ("status:stopped | running", ["aaa", "bbb"]),
        ("status: stopped | succeeded", ["aaa", "ccc"]),
        ("status:stopped | name:x", ["aaa", "bbb"]),
        ("status:succeeded | in.activation:tanh", ["bbb", "ccc"]),
        ("name:train run:1", ["aaa"]),
        ("in.data:s3://bucket/a", ["ccc"]),
        ("name:%run:1", ["aaa"]),
    ],
)
def test_polyaxon_queries(query: str, expected: list[str]) -> None:
    assert ids(query) == expected


def test_missing_joiner_between_known_fields_is_still_an_error() -> None:
    with pytest.raises(QueryError) as refused:
        ids("status:running name:x")
    assert "expected ',', 'AND' or 'OR' between conditions" in refused.value.message()


def test_sort_by_polyaxon_names() -> None:
    assert ids("", "-outputs.loss") == ["aaa", "ccc", "bbb"]
    assert ids("", "uuid") == ["aaa", "bbb", "ccc"]


def test_sort_value_starting_with_a_dash_is_not_an_option() -> None:
    assert dash_values(["ls", "q", "--sort", "-metrics.loss"]) == ["ls", "q", "--sort=-metrics.loss"]
    assert dash_values(["run", "--", "x", "--sort", "-y"]) == ["run", "--", "x", "--sort", "-y"]


def test_readme_ls_command_works(cli: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    for loss in (0.3, 0.1, 0.2):
        cli("run", "--wait", "--", "python", "-c", f"import kubelab; kubelab.report(loss={loss})")
    done = cli("ls", "status:succeeded, metrics.loss:<1", "--sort", "-metrics.loss", "-o", "json")
    assert [r["metrics"]["loss"] for r in json.loads(done.stdout)["items"]] == [0.3, 0.2, 0.1]
