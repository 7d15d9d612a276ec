"""A run's timeline in `kubelab show`: its states' spans, a preemption and the resume after it."""

from __future__ import annotations

import io
from typing import Any

from kubelab.run_timeline import Span, span_rows, timeline, timeline_record
from kubelab.show_layout import print_layout


def at(second: float) -> str:
    whole = int(second)
    return f"2026-11-26T10:00:{whole:02d}.{int((second - whole) * 1000):03d}Z"


HISTORY: list[dict[str, Any]] = [
    {"state": "Queued", "reason": "waiting for 1 GPU(s): 2 experiment(s) ahead", "at": at(0)},
    {"state": "Queued", "reason": "waiting for 1 GPU(s): 1 experiment(s) ahead", "at": at(1)},
    {"state": "Running", "reason": "running 1 process on GPU 0", "at": at(2)},
    {"state": "Preempted", "reason": "preempted for deadline (abc) (priority high)", "at": at(7.5)},
    {"state": "Preempted", "reason": "preempted for deadline (abc); waiting for 1 GPU(s)", "at": at(8)},
    {"state": "Running", "reason": "running 1 process on GPU 0", "at": at(10)},
    {
        "state": "Running",
        "reason": "replica 1 killed by SIGKILL; 1 of 2 replicas go on from step 5",
        "at": at(12),
    },
    {"state": "Succeeded", "reason": "exited 0", "at": at(15)},
]


def test_repeats_fold_into_spans_and_a_resume_follows_a_preemption() -> None:
    spans = timeline(HISTORY)
    assert [(s.state, s.seconds, s.resumed) for s in spans] == [
        ("Queued", 2.0, False),
        ("Running", 5.5, False),
        ("Preempted", 2.5, False),
        ("Running", 2.0, True),
        ("Running", 3.0, False),  # a new reason while running is news: a replica lost
        ("Succeeded", None, False),
    ]
    assert spans[0].reason.endswith("2 experiment(s) ahead")  # the span's first reason
    assert spans[2] == Span("Preempted", HISTORY[3]["reason"], at(7.5), 2.5)
    assert timeline([]) == []


def test_kubelab_show_draws_the_timeline() -> None:
    record = {"id": "abc123", "name": "long", "status": "Succeeded", "reason": "exited 0", "history": HISTORY}
    out = io.StringIO()
    print_layout(record, [], [], file=out)
    text = out.getvalue()
    section = text.split("Timeline (UTC)")[1].splitlines()[1:7]
    assert [line.split()[0] for line in section] == [
        "Queued",
        "Running",
        "Preempted",
        "Running",
        "Running",
        "Succeeded",
    ]
    assert "Running (resumed)  10:00:10     2.0s  running 1 process on GPU 0" in text
    assert "Preempted          10:00:07     2.5s  preempted for deadline (abc) (priority high)" in text


def test_an_elastic_runs_spans_carry_its_size_in_the_record_and_in_show() -> None:
    history: list[dict[str, Any]] = [
        {"state": "Running", "reason": "running 2 processes on GPU 0,1", "at": at(0), "replicas": 2},
        {
            "state": "Running",
            "reason": "shrunk to 1 of 2 replicas for urgent (x)",
            "at": at(4),
            "replicas": 1,
        },
        {
            "state": "Running",
            "reason": "grew to 2 of 2 replicas: GPU 1 came free",
            "at": at(9),
            "replicas": 2,
        },
        {"state": "Succeeded", "reason": "all 2 processes exited 0", "at": at(12)},
    ]
    record = timeline_record(history)
    assert [(s["replicas"], s["seconds"]) for s in record] == [(2, 4.0), (1, 5.0), (2, 3.0), (None, None)]
    assert record[1]["reason"].startswith("shrunk to 1 of 2 replicas") and record[1]["start"] == at(4)
    assert [label for label, _ in span_rows(timeline(history))] == [
        "Running x2",
        "Running x1",
        "Running x2",
        "Succeeded",
    ]
