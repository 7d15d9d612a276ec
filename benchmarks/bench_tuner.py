"""How long a tuner takes to suggest once a sweep has 1,000 finished trials.

Builds one history of `--history` finished trials (random suggestions of a 5-parameter
space, scored by an analytic function), then times `ask()` + `tell()` for the random
sampler and for TPE over that same history (in memory, or in the RDB `--storage`).
Prints JSON lines: one per tuner with the median and 90th-percentile seconds, then the
TPE/random ratio.

    python benchmarks/bench_tuner.py [--history 1000] [--asks 30] [--storage sqlite:///b.db]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from typing import Any

import optuna

from kubelab.sweeps.space import SearchSpace
from kubelab.sweeps.tuner_catalog import resolve_tuner
from kubelab.sweeps.tuners import Tuner, build_sampler

SPACE = SearchSpace.parse(
    {
        "lr": {"_type": "loguniform", "_value": [1e-5, 1e-1]},
        "dropout": {"_type": "uniform", "_value": [0, 0.5]},
        "layers": {"_type": "randint", "_value": [1, 8]},
        "batch": {"_type": "quniform", "_value": [16, 256, 16]},
        "opt": {"_type": "choice", "_value": ["sgd", "adam", "adamw"]},
    }
)


def score(flat: dict[str, Any]) -> float:
    penalty = {"sgd": 0.3, "adam": 0.0, "adamw": 0.1}[flat["opt"]]
    value: float = (
        (math.log10(flat["lr"]) + 3) ** 2 + (flat["dropout"] - 0.2) ** 2 + abs(flat["layers"] - 4) + penalty
    )
    return value


def timed_asks(tuner: Tuner, asks: int) -> list[float]:
    seconds = []
    for _ in range(asks):
        start = time.perf_counter()
        suggestion = tuner.ask()
        tuner.tell(suggestion.number, score(suggestion.flat))
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1000)
    parser.add_argument("--asks", type=int, default=30)
    parser.add_argument(
        "--storage", help="an Optuna RDB URL such as sqlite:///tmp/bench.db (default: memory)"
    )
    options = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    medians = {}
    for name in ("random", "tpe"):
        study_name = f"bench-{name}-{time.time_ns()}" if options.storage else None
        tuner = Tuner(SPACE, "random", {"seed": 0}, storage=options.storage, study_name=study_name)
        timed_asks(tuner, options.history)  # the same history for both, built by random search
        tuner.study.sampler = build_sampler(resolve_tuner({"name": name, "args": {"seed": 1}}), 1)
        seconds = timed_asks(tuner, options.asks)
        medians[name] = statistics.median(seconds)
        print(json.dumps({
            "bench": "tuner_suggest",
            "tuner": name,
            "storage": "rdb" if options.storage else "memory",
            "finished_trials": options.history,
            "asks": options.asks,
            "median_s": round(medians[name], 6),
            "p90_s": round(statistics.quantiles(seconds, n=10)[-1], 6),
        }))  # fmt: skip
    print(
        json.dumps(
            {"bench": "tuner_suggest", "ratio_tpe_over_random": round(medians["tpe"] / medians["random"], 2)}
        )
    )


if __name__ == "__main__":
    main()
