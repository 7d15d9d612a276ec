"""Micro benchmark: a 3-condition PQL filter over 10,000 records vs a hand-written comprehension.

Prints one JSON line; `ratio` is compiled-query time over comprehension time in the same run,
so it means the same thing on any machine. Run: `python benchmarks/bench_query.py`.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from kubelab.query import compile_query

QUERY = "status:succeeded, params.activation:relu|sigmoid, metrics.loss:<=0.3"
STATUSES = ("Succeeded", "Failed", "Running", "Stopped")


def make_records(count: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    records = []
    for i in range(count):
        record = {
            "id": f"{i:012d}",
            "name": f"run-{i}",
            "status": rng.choice(STATUSES),
            "created_at": f"2026-11-{rng.randint(1, 28):02d}T10:00:00.000Z",
            "params": {
                "lr": rng.choice((0.1, 0.01, 0.001)),
                "activation": rng.choice(("relu", "sigmoid", "tanh")),
            },
            "tags": rng.sample(["baseline", "resnet", "vgg", "ablation"], rng.randint(0, 2)),
            "metrics": {"loss": round(rng.random(), 3)} if rng.random() < 0.9 else {},
        }
        records.append(record)
    return records


def by_hand(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        r
        for r in records
        if r.get("status") == "Succeeded"
        and r.get("params", {}).get("activation") in ("relu", "sigmoid")
        and (loss := r.get("metrics", {}).get("loss")) is not None
        and loss <= 0.3
    ]


def median_ms(run: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main(count: int = 10_000, repeats: int = 31) -> dict[str, Any]:
    records = make_records(count)
    query = compile_query(QUERY)
    got = [r for r in records if query.matches(r)]
    if got != by_hand(records):
        raise SystemExit("the compiled query and the comprehension disagree")
    compiled = median_ms(lambda: query.filter(records), repeats)
    baseline = median_ms(lambda: by_hand(records), repeats)
    return {
        "bench": "query_10k",
        "median_ms": round(compiled, 3),
        "baseline_median_ms": round(baseline, 3),
        "ratio": round(compiled / baseline, 2),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
