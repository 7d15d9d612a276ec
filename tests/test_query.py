"""PQL: every operator over a small set of records, sorting, paging and the error messages."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any, cast

import pytest

from kubelab.errors import ValidationError
from kubelab.query import compile_query, compile_sort, select
from kubelab.query.parser import QueryError

RECORDS: list[dict[str, Any]] = [
    {
        "id": "a1",
        "name": "train-resnet",
        "status": "Succeeded",
        "reason": "exited 0",
        "exit_code": 0,
        "created_at": "2026-11-21T19:30:00.123Z",
        "started_at": "2026-11-21T19:30:01.000Z",
        "finished_at": "2026-11-21T19:32:01.000Z",
        "duration": 120.0,
        "params": {"lr": 0.01, "activation": "relu", "layers": [64, 64]},
        "tags": ["baseline", "resnet"],
        "sweep": None,
        "trial": None,
        "metrics": {"loss": 0.25, "acc": 0.91, "default": 0.91},
        "step": 10,
        "backend": "local",
        "user": "ada",
        "description": "baseline ablation",
        "framework": "pytorch",
        "replicas": 1,
        "attempt": 0,
        "gpu_ids": [0],
        "resources": {"gpus": 1, "gpu_type": "a100", "cpu": 4, "memory": "16Gi"},
    },
    {
        "id": "b2",
        "name": "train-vgg",
        "status": "Failed",
        "reason": "OOMKilled",
        "exit_code": 137,
        "created_at": "2026-11-22T08:00:00.000Z",
        "duration": 30.5,
        "params": {"lr": 0.1, "activation": "sigmoid", "use_bn": True},
        "tags": ["vgg"],
        "sweep": "s1",
        "trial": 1,
        "metrics": {"loss": 0.5, "acc": 0.4},
        "step": 3,
        "backend": "kubernetes",
        "user": "bob",
        "framework": "tensorflow",
        "replicas": 2,
        "attempt": 1,
        "gpu_ids": [0, 1],
        "resources": {"gpus": 2, "cpu": "500m"},
    },
    {
        "id": "c3",
        "name": "my run, v2",
        "status": "stopped",
        "created_at": "2026-11-20T23:59:59.999Z",
        "duration": 3600,
        "params": {"lr": "0.01", "activation": "Relu"},
        "sweep": "s1",
        "trial": 2,
        "metrics": {"loss": math.nan},
        "backend": "local",
    },
    {
        "id": "d4",
        "name": "sweep-trial",
        "status": "Pruned",
        "created_at": None,
        "duration": 5400,
        "params": {},
        "tags": [],
        "sweep": "s1",
        "trial": 3,
        "metrics": {"loss": [0.9, 0.4]},
        "backend": "local",
    },
    {  # every field has the wrong type: matches nothing, raises nothing
        "id": "e5",
        "name": None,
        "status": 7,
        "tags": "baseline",
        "params": "oops",
        "metrics": None,
        "created_at": "garbage",
        "duration": "long",
        "trial": "x",
    },
    {
        "id": "f6",
        "name": "Train-BERT",
        "status": "Running",
        "created_at": "2026-11-21T10:00:00Z",
        "duration": 0,
        "params": {"lr": 1e-3, "activation": "gelu", "optimizer": {"name": "adam", "beta": 0.9}},
        "tags": ["baseline"],
        "metrics": {"loss": 0.3, "acc": 0.8},
        "backend": "local",
    },
]
ALL = ["a1", "b2", "c3", "d4", "e5", "f6"]

CASES = [
    # empty query
    ("", ALL),
    ("   ", ALL),
    # equality on text fields, case-sensitive
    ("name:train-vgg", ["b2"]),
    ("name:train-VGG", []),
    ("id:a1", ["a1"]),
    ("backend:local", ["a1", "c3", "d4", "f6"]),
    ("user:ada", ["a1"]),
    ("reason:OOMKilled", ["b2"]),
    ("sweep:s1", ["b2", "c3", "d4"]),
    # status: case-insensitive on both sides; wrong-typed status never matches
    ("status:succeeded", ["a1"]),
    ("status:SUCCEEDED", ["a1"]),
    ("status:Stopped", ["c3"]),
    ("status:~succeeded", ["b2", "c3", "d4", "f6"]),
    ("status:failed|stopped|pruned", ["b2", "c3", "d4"]),
    ("status:~failed|stopped", ["a1", "d4", "f6"]),
    ("status:run%", ["f6"]),
    # numbers
    ("exit_code:0", ["a1"]),
    ("exit_code:~0", ["b2"]),
    ("exit_code:>0", ["b2"]),
    ("trial:<2", ["b2"]),
    ("trial:<=2", ["b2", "c3"]),
    ("trial:>2", ["d4"]),
    ("trial:>=2", ["c3", "d4"]),
    ("trial:1..2", ["b2", "c3"]),
    ("trial:~1..2", ["d4"]),
    ("trial:1|3", ["b2", "d4"]),
    ("step:>5", ["a1"]),
    # nil and ~nil
    ("trial:nil", ["a1", "f6"]),
    ("trial:~nil", ["b2", "c3", "d4", "e5"]),
    ("sweep:NIL", ["a1", "e5", "f6"]),
    ("user:nil", ["c3", "d4", "e5", "f6"]),
    ("created_at:nil", ["d4"]),
    ("metrics.acc:nil", ["c3", "d4", "e5"]),
    ("metrics.acc:~nil", ["a1", "b2", "f6"]),
    ("params.missing:nil", ALL),
    # patterns: case-insensitive starts/ends/contains
    ("name:train%", ["a1", "b2", "f6"]),
    ("name:%VGG", ["b2"]),
    ("name:%res%", ["a1"]),
    ("name:~train%", ["c3", "d4"]),
    ("name:%a%|%b%", ["a1", "b2", "d4", "f6"]),
    ("id:a%", ["a1"]),
    # quoted values keep separators and special characters literal
    ('name:"my run, v2"', ["c3"]),
    ("name:'my run, v2'", ["c3"]),
    ('name:"my run%"', []),
    ('name:"my run"%', ["c3"]),
    ('name:"train-vgg"|"my run, v2"', ["b2", "c3"]),
    ('reason:"OOMKilled"', ["b2"]),
    # tags: any tag matches; missing tags are no tags; a non-list never matches
    ("tags:baseline", ["a1", "f6"]),
    ("tags:vgg|resnet", ["a1", "b2"]),
    ("tags:~baseline", ["b2", "c3", "d4"]),
    ("tags:res%", ["a1"]),
    ("tags:nil", ["c3", "d4"]),
    ("tags:~nil", ["a1", "b2", "e5", "f6"]),
    # params: numeric when both sides are numbers, text otherwise
    ("params.lr:0.01", ["a1", "c3"]),
    ("params.lr:1e-2", ["a1"]),
    ('params.lr:"0.01"', ["a1", "c3"]),
    ("params.lr:<0.05", ["a1", "f6"]),
    ("params.lr:~<0.05", ["b2"]),
    ("params.lr:0.001..0.01", ["a1", "f6"]),
    ("params.lr:0.01|0.1", ["a1", "b2", "c3"]),
    ("params.lr:0.0%", ["a1", "c3", "f6"]),
    ("params.activation:relu", ["a1"]),
    ("params.activation:relu|sigmoid", ["a1", "b2"]),
    ("params.activation:%elu", ["a1", "c3", "f6"]),
    ("params.activation:>m", ["a1", "b2"]),
    ("params.activation:a..h", ["f6"]),
    ("params.activation:~relu", ["b2", "c3", "f6"]),
    ("params.use_bn:true", ["b2"]),
    ("params.layers:'[64, 64]'", ["a1"]),
    ("params.optimizer.name:adam", ["f6"]),
    ("params.optimizer.beta:>0.5", ["f6"]),
    # metrics: last reported value; NaN compares with nothing but its spelling
    ("metrics.loss:<=0.3", ["a1", "f6"]),
    ("metrics.loss:>0.3", ["b2", "d4"]),
    ("metrics.loss:~<0.3", ["b2", "c3", "d4", "f6"]),
    ("metrics.loss:0.4", ["d4"]),
    ("metrics.loss:nan", ["c3"]),
    ("metrics.default:>=0.9", ["a1"]),
    # durations
    ("duration:>1m", ["a1", "c3", "d4"]),
    ("duration:1h", ["c3"]),
    ("duration:1h30m", ["d4"]),
    ("duration:90s..1h", ["a1", "c3"]),
    ("duration:<=30.5", ["b2", "f6"]),
    ("duration:~0", ["a1", "b2", "c3", "d4"]),
    # dates: a bare date is the whole day; comparisons respect what was written
    ("created_at:2026-11-21", ["a1", "f6"]),
    ("created_at:~2026-11-21", ["b2", "c3"]),
    ("created_at:<2026-11-21", ["c3"]),
    ("created_at:<=2026-11-21", ["a1", "c3", "f6"]),
    ("created_at:>2026-11-21", ["b2"]),
    ("created_at:>=2026-11-21", ["a1", "b2", "f6"]),
    ("created_at:2026-11", ["a1", "b2", "c3", "f6"]),
    ("created_at:2026-11-21 10:00", ["f6"]),
    ("created_at:2026-11-21T19:30:00.123Z", ["a1"]),
    ("created_at:>2026-11-21T12:00:00+02:00", ["a1", "b2"]),
    ("created_at:2026-11-21 12:00..2026-11-22 08:00", ["a1", "b2"]),
    ("created_at:2026-11-20..2026-11-21", ["a1", "c3", "f6"]),
    ("created_at:2026-11-20|2026-11-22", ["b2", "c3"]),
    ("started_at:2026-11-21", ["a1"]),
    ("finished_at:>=2026-11-21 19:32", ["a1"]),
    ("finished_at:>2026-11-21 19:32", []),  # after that minute: 19:32:01 is inside it
    ("finished_at:>2026-11-21 19:32:00", ["a1"]),
    # AND / OR / parentheses: AND binds tighter
    ("status:succeeded, tags:baseline", ["a1"]),
    ("status:succeeded and tags:vgg", []),
    ("status:succeeded OR status:failed", ["a1", "b2"]),
    ("status:failed OR status:stopped AND tags:nil", ["b2", "c3"]),
    ("(status:failed OR status:stopped) AND tags:~vgg", ["c3"]),
    ("(status:failed OR status:stopped), trial:2", ["c3"]),
    ("tags:baseline AND (metrics.loss:<0.28 OR name:%bert)", ["a1", "f6"]),
    ("((status:running))", ["f6"]),
    ("status:succeeded, params.activation:relu|sigmoid, metrics.loss:<=0.3", ["a1"]),
    ("name : train-vgg", ["b2"]),
    ("name:sweep-trial or name:train-vgg or id:f6 or id:zz", ["b2", "d4", "f6"]),
    ("backend:local and trial:~nil and duration:>1h", ["d4"]),
    ("id:a1 OR id:b2 OR id:c3", ["a1", "b2", "c3"]),
    # the other fields a run record carries
    ("description:%ablation%", ["a1"]),
    ("framework:pytorch|tensorflow", ["a1", "b2"]),
    ("replicas:>1", ["b2"]),
    ("attempt:0", ["a1"]),
    ("gpu_ids:1", ["b2"]),
    ("gpu_ids:~1", ["a1", "c3", "d4", "e5", "f6"]),  # no list is an empty list
    ("resources.gpus:>=1", ["a1", "b2"]),
    ("resources.gpu_type:a100", ["a1"]),
    ("resources.cpu:4", ["a1"]),
    ("resources.cpu:500m", ["b2"]),
    ("resources.memory:%gi", ["a1"]),
]


@pytest.mark.parametrize(("query", "expected"), CASES, ids=[c[0] or "<empty>" for c in CASES])
def test_query_matches(query: str, expected: list[str]) -> None:
    matched = [r["id"] for r in RECORDS if compile_query(query).matches(r)]
    assert matched == expected
    assert [r["id"] for r in select(RECORDS, query)] == expected


def test_matches_returns_bools_and_never_raises_on_odd_records() -> None:
    odd: list[dict[str, Any]] = [
        {},
        {"params": None},
        {"metrics": []},
        {"tags": None},
        {"status": None},
        {"created_at": 5},
        {"params": {"lr": {"a": 1}}},
        {"tags": [None, 3]},
    ]
    for query, _ in CASES:
        compiled = compile_query(query)
        for record in odd:
            assert compiled.matches(record) in (True, False)


NEGATABLE = [
    q
    for q, _ in CASES
    if q.count(":") == 1 and ":~" not in q and " " not in q.strip() and "nil" not in q.lower()
]
WRONG_TYPED_IN_E5 = ("name", "status", "tags", "params", "metrics", "created_at", "duration", "trial")


@pytest.mark.parametrize("query", NEGATABLE)
def test_negation_never_overlaps_and_skips_wrong_types(query: str) -> None:
    field, _, operation = query.partition(":")
    positive, negative = compile_query(query), compile_query(f"{field}:~{operation}")
    for record in RECORDS:
        assert not (positive.matches(record) and negative.matches(record)), record["id"]
    if field.split(".")[0] in WRONG_TYPED_IN_E5:
        assert not negative.matches(RECORDS[4])


@pytest.mark.parametrize(
    ("query", "record", "expected"),
    [
        ('name:"say \\"hi\\""', {"name": 'say "hi"'}, True),
        ("name:'it\\'s'", {"name": "it's"}, True),
        ("name:f(x), id:1", {"name": "f(x)", "id": "1"}, True),
        ("name:f(x,y)", {"name": "f(x,y)"}, True),
        ('name:run" v2, final"', {"name": "run v2, final"}, True),  # quotes may cover a part
        ('name:"a AND b"', {"name": "a AND b"}, True),
        ("name:a..b", {"name": "abc"}, True),  # text range
        ('name:"a..b"', {"name": "a..b"}, True),
        ('name:"a|b"', {"name": "a|b"}, True),
        ('name:"nil"', {"name": "nil"}, True),
        ('name:"~x"', {"name": "~x"}, True),
        ("created_at:2026-11-21", {"created_at": "2026-11-21T10:00:00"}, True),  # naive is UTC
        ("created_at:2026-11-21", {"created_at": 1_795_000_000}, False),
        ("created_at:2026-11-18", {"created_at": 1_795_000_000}, True),  # epoch seconds
        ("created_at:2026-11-21", {"created_at": math.nan}, False),
        ("params.flag:true", {"params": {"flag": True}}, True),
        ("params.flag:1", {"params": {"flag": True}}, False),  # booleans are not numbers
        ("metrics.loss:<1", {"metrics": {"loss": []}}, False),
    ],
)
def test_literal_values(query: str, record: dict[str, Any], expected: bool) -> None:
    assert compile_query(query).matches(record) is expected


def test_compiled_queries_are_cached_and_reusable() -> None:
    assert compile_query("status:failed") is compile_query("status:failed")
    assert repr(compile_query("status:failed")) == "Query('status:failed')"
    assert compile_query("").matches_all and not compile_query("id:x").matches_all
    assert compile_query(None).matches_all  # type: ignore[arg-type]
    assert compile_query("status:failed").filter(RECORDS) == [RECORDS[1]]
    assert compile_sort("-name") is compile_sort("-name")
    assert repr(compile_sort("-name")) == "Sort('-name')"


# ---------------------------------------------------------------- sort and paging

SORTS = [
    ("", ALL),
    ("metrics.loss", ["a1", "f6", "d4", "b2", "c3", "e5"]),
    ("-metrics.loss", ["b2", "d4", "f6", "a1", "c3", "e5"]),
    ("trial", ["b2", "c3", "d4", "a1", "e5", "f6"]),
    ("-trial", ["d4", "c3", "b2", "a1", "e5", "f6"]),
    ("created_at", ["c3", "f6", "a1", "b2", "d4", "e5"]),
    ("-created_at", ["b2", "a1", "f6", "c3", "d4", "e5"]),
    ("backend, -duration", ["b2", "d4", "c3", "a1", "f6", "e5"]),
    ("+backend,name", ["b2", "c3", "d4", "f6", "a1", "e5"]),
    ("status", ["b2", "d4", "f6", "c3", "a1", "e5"]),
    ("-params.lr", ["b2", "a1", "f6", "c3", "d4", "e5"]),
    ("sweep", ["b2", "c3", "d4", "a1", "e5", "f6"]),
    ("-sweep", ["b2", "c3", "d4", "a1", "e5", "f6"]),
    ("duration", ["f6", "b2", "a1", "c3", "d4", "e5"]),
    ("-resources.gpus", ["b2", "a1", "c3", "d4", "e5", "f6"]),
    (" -metrics.acc , id ", ["a1", "f6", "b2", "c3", "d4", "e5"]),
]


@pytest.mark.parametrize(("sort", "expected"), SORTS, ids=[s[0] or "<none>" for s in SORTS])
def test_sort(sort: str, expected: list[str]) -> None:
    assert [r["id"] for r in compile_sort(sort).apply(RECORDS)] == expected
    assert [r["id"] for r in select(RECORDS, sort=sort)] == expected


def test_name_sort_is_natural_and_ids_keep_their_text_order() -> None:
    names = ["run-2000", "Run-10", "run-999", "run-2", "run-02", "run-" + "9" * 5000, "alpha", "run-2b"]
    rows = [{"id": f"{i:012d}", "name": n} for i, n in enumerate(names)]
    ordered = [r["name"] for r in compile_sort("name")(rows)]
    assert ordered == ["alpha", "run-02", "run-2", "run-2b", "Run-10", "run-999", "run-2000", names[5]]
    assert [r["name"] for r in compile_sort("-name")(rows)] == ordered[::-1]
    ids = [{"id": i} for i in ("1m8a9zzzzzzz", "1m8a10000000")]
    assert [r["id"] for r in compile_sort("id")(ids)] == ["1m8a10000000", "1m8a9zzzzzzz"]


def test_sort_by_time_mixes_timestamp_spellings() -> None:
    stamps = [
        "2026-11-21T10:00:00.500Z",
        "2026-11-21T10:00:00.2Z",
        "2026-11-21T12:00:00+02:00",
        "2026-11-21T10:00:00.123456",
        1_795_000_000,
        "garbage",
        None,
        "2026-11-21T09:59:59.999Z",
    ]
    rows = [{"id": str(i), "created_at": v} for i, v in enumerate(stamps)]
    order = [r["id"] for r in compile_sort("created_at")(rows)]
    assert order == ["4", "7", "2", "3", "1", "0", "5", "6"]  # 12:00+02:00 is 10:00Z
    assert [r["id"] for r in compile_sort("-created_at")(rows)] == ["0", "1", "3", "2", "7", "4", "5", "6"]


def test_sort_is_stable_and_mixed_types_do_not_raise() -> None:
    rows = [{"id": str(i), "params": {"x": v}} for i, v in enumerate([2, "b", 1, "a", 2, None])]
    assert [r["id"] for r in compile_sort("params.x")(rows)] == ["2", "0", "4", "3", "1", "5"]
    assert [r["id"] for r in compile_sort("-params.x")(rows)] == ["0", "4", "2", "1", "3", "5"]


def test_select_filters_sorts_and_pages() -> None:
    assert [r["id"] for r in select(RECORDS, "backend:local", "-duration", limit=2)] == ["d4", "c3"]
    assert [r["id"] for r in select(RECORDS, "backend:local", "-duration", 2, 1)] == ["c3", "a1"]
    assert [r["id"] for r in select(iter(RECORDS), limit=2, offset=3)] == ["d4", "e5"]
    assert select(RECORDS, "id:nothing") == []
    assert select(RECORDS, limit=0) == []


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"limit": -1}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"offset": -2}, "offset"),
        ({"offset": True}, "offset"),
        ({"query": 5}, "query"),
        ({"sort": ["x"]}, "sort"),
    ],
)
def test_select_rejects_bad_arguments(kwargs: dict[str, Any], path: str) -> None:
    with pytest.raises(ValidationError) as caught:
        select(RECORDS, **kwargs)
    assert [f.path for f in caught.value.fields] == [path]


# ---------------------------------------------------------------- errors

MALFORMED = [
    # (query, position, words the reason must contain)
    ("status:succeeded, params.x:", 28, "expected a value after 'params.x:'"),
    ("(status:failed OR status:stopped", 33, "expected ')' to close the '(' at position 1"),
    ("status:failed)", 14, "unmatched ')'"),
    ("()", 2, "empty parentheses"),
    ("status:failed AND", 18, "expected a condition after 'AND', found the end"),
    ("status:failed,", 15, "expected a condition after ','"),
    ("status:failed, OR name:x", 16, "expected a condition after ',', found 'OR'"),
    (", status:failed", 1, "expected a condition such as status:running, found ','"),
    ("status:failed status:stopped", 15, "expected ',', 'AND' or 'OR' between conditions"),
    ("name:a (id:b)", 8, "expected ',', 'AND' or 'OR' before '('"),
    ("(status:failed) name:x", 17, "expected ',', 'AND' or 'OR' after ')'"),
    ("(status:failed)(name:x)", 16, "expected ',', 'AND' or 'OR' after ')'"),
    ("((status:failed) name:x)", 18, "expected ',', 'AND' or 'OR' after ')'"),
    ("status:failed OR (name:x", 25, "expected ')' to close the '(' at position 18"),
    ("status:failed, (name:x OR", 26, "expected a condition after 'OR'"),
    ("status:failed, (", 17, "expected a condition after '(', found the end"),
    ("status", 7, "expected ':' after field 'status'"),
    ("name:a AND b", 13, "expected ':' after field 'b'"),  # AND joins: quote "a AND b"
    (":failed", 1, "expected a field name before ':'"),
    ("~status:failed", 1, "'~' goes after the colon: field:~value"),
    ("status:failed, <3", 16, "expected a field name before '<'"),
    ("stauts:failed", 1, "unknown field 'stauts'; did you mean 'status'?"),
    ("status:failed, param.lr:1", 16, "unknown field 'param.lr'; did you mean 'params.lr'?"),
    ("bogus:1", 1, "unknown field 'bogus'; fields are id, name, status"),
    ("params.:1", 8, "expected a parameter name after 'params.'"),
    ("status:sucess", 8, "unknown status 'sucess'; did you mean 'succeeded'?"),
    ("status:faild|stopped", 8, "did you mean 'failed'?"),
    ("status:stopped|xyz", 16, "unknown status 'xyz'; statuses are pending, queued, building, running"),
    ("status:%x|zz", 11, "unknown status 'zz'"),
    ("status:>failed", 8, "status has no order"),
    ("metrics.loss:5..1", 17, "empty range: 5 is greater than 1"),
    ("metrics.loss:..1", 14, "expected a value before '..'"),
    ("metrics.loss:1..", 17, "expected a value after '..'"),
    ("metrics.loss:1..2..3", 18, "a range has exactly one '..'"),
    ("metrics.loss:1..b", 17, "metrics.loss holds numbers; '..' needs a number, not 'b'"),
    ("params.lr:1..b", 11, "both ends of a range must be numbers, or both text"),
    ("metrics.loss:<<0.5", 15, "'<' cannot be followed by another operator '<'"),
    ("metrics.loss:>=<1", 16, "'>=' cannot be followed by another operator '<'"),
    ("metrics.loss:<abc", 15, "metrics.loss holds numbers; '<' needs a number, not 'abc'"),
    ('metrics.acc:>"0.5"', 14, "metrics.acc holds numbers"),
    ("metrics.loss:1|2..3", 15, "a range cannot contain '|'"),
    ("created_at:2026-11-22..2026-11-21", 24, "empty range"),
    ("created_at:2026-13-01", 12, "'2026-13-01' is not a valid date (month must be in 1..12)"),
    ("created_at:2026-11-31", 12, "day is out of range for month"),
    ("created_at:yesterday", 12, "expected a date such as 2026-11-21"),
    ("created_at:>2026-11-21 25:00", 13, "hour must be in 0..23"),
    ("created_at:2026-11%", 12, "'%' patterns match text; 'created_at' holds dates"),
    ("duration:>5x", 11, "expected a duration such as 90, 90s, 30m, 1h or 1h30m; got '5x'"),
    ("trial:abc", 7, "'trial' holds numbers; 'abc' is not one"),
    ("trial:1%", 7, "'%' patterns match text"),
    ("tags:<3", 6, "tags can be matched by value"),
    ("gpu_ids:0..1", 9, "gpu_ids can be matched by value"),
    ("resources.gpu:1", 1, "unknown field 'resources.gpu'; did you mean 'resources.gpus'?"),
    ("status:~", 9, "expected a value after '~'"),
    ("status:~~failed", 9, "'~' can appear only once"),
    ("metrics.loss:<=", 16, "expected a value after '<='"),
    ("metrics.loss:<1|2", 16, "'<' takes one value; '|' cannot follow it"),
    ("name:%", 6, "expected text to match next to '%'"),
    ("name:<a%", 7, "'%' patterns cannot be combined with '<'"),
    ("name:a||b", 8, "expected a value between '|' and '|'"),
    ("name:|a", 6, "expected a value before '|'"),
    ("name:a|", 8, "expected a value after '|'"),
    ('name:"my run', 6, 'this " is never closed'),
    ("name:x, name:", 14, "use name:nil to match a missing value"),
]


@pytest.mark.parametrize(("query", "position", "reason"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_query(query: str, position: int, reason: str) -> None:
    with pytest.raises(ValidationError) as caught:
        compile_query(query)
    error = caught.value
    assert isinstance(error, QueryError) and error.position == position
    [field] = error.fields
    assert field.path == "query"
    assert field.reason.startswith(f"position {position}: ")
    assert reason in field.reason
    assert error.status == 422 and cast(Any, error.to_json()["fields"])[0]["path"] == "query"
    excerpt, caret = error.detail.splitlines()[1:]
    assert caret.index("^") - 4 == position - 1 and excerpt.strip() == query.strip()


def test_error_excerpt_windows_long_queries() -> None:
    query = "name:x, " * 30 + "bogus:1"
    with pytest.raises(QueryError) as caught:
        compile_query(query)
    excerpt, caret = caught.value.detail.splitlines()[1:]
    assert excerpt.startswith("    ...") and "bogus:1" in excerpt
    assert excerpt[caret.index("^") :].startswith("bogus")


MALFORMED_SORTS = [
    ("-metrics.loss,", 15, "expected a field name after ','"),
    (",name", 1, "expected a field name before ','"),
    ("--name", 2, "expected a field name after the sign"),
    ("-", 2, "expected a field name after the sign"),
    ("created_at desc", 11, "expected ',' between sort keys (write -FIELD for descending"),
    ("name id", 5, "expected ',' between sort keys"),
    ("crated_at", 1, "unknown field 'crated_at'; did you mean 'created_at'?"),
    ("name, -metric.loss", 8, "did you mean 'metrics.loss'?"),
    ("tags", 1, "cannot sort by 'tags'"),
    ("name,gpu_ids", 6, "cannot sort by 'gpu_ids': it holds a list"),
    ("metrics.", 9, "expected a metric name after 'metrics.'"),
]


@pytest.mark.parametrize(("sort", "position", "reason"), MALFORMED_SORTS, ids=[m[0] for m in MALFORMED_SORTS])
def test_malformed_sort(sort: str, position: int, reason: str) -> None:
    with pytest.raises(QueryError) as caught:
        compile_sort(sort)
    [field] = caught.value.fields
    assert field.path == "sort" and caught.value.detail.startswith("Invalid sort:")
    assert field.reason.startswith(f"position {position}: ") and reason in field.reason


def test_import_stays_light() -> None:
    """The query language sits on listing hot paths: no optuna, yaml or kubernetes."""
    code = (
        "import sys, kubelab.query.compiler; print(sorted(m for m in ('optuna', 'yaml', 'kubernetes',"
        " 'torch', 'kubelab.records') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
