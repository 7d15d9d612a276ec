"""What an environment costs a run: starting in one already built, and building one.

1. Start latency: the same command (`python -c` printing the time it started) submitted as a
   run with no environment and as a run whose environment is already built; the delay from
   submit to the trial's first line, median of `--runs` each. The environment's run may be
   at most 50 ms later (`extra_ms`).
2. First build: kubelab building a 3-package environment (a new key, so venv, install,
   definition, lock) against `uv pip install` of the same 3 packages into a fresh venv, uv's
   cache warm for both, median of `--builds` each (`ratio_build`, target <= 1.5).

The packages are wheels written into a local folder (offline: nothing is downloaded).

    python benchmarks/bench_env.py [--runs 10] [--builds 5]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from local_wheels import make_wheel

from kubelab.environments.cache import EnvironmentCache, uv_binary
from kubelab.experiments import Experiments

PACKAGES = ["benchalpha", "benchbeta", "benchgamma"]
STARTED = "import time; print(repr(time.time()), flush=True)"


def wait_first_line(lab: Experiments, run_id: str) -> float:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = "".join(lab.logs(run_id)).strip()
        if text:
            return float(text.splitlines()[0])
        time.sleep(0.002)
    raise RuntimeError(f"{run_id} printed nothing: {lab.get(run_id)}")


def start_delay(lab: Experiments, spec: dict[str, Any]) -> float:
    submitted = time.time()
    record = lab.submit(spec)
    started = wait_first_line(lab, record["id"])
    deadline = time.monotonic() + 30
    while lab.get(record["id"])["status"] not in ("Succeeded", "Failed") and time.monotonic() < deadline:
        time.sleep(0.005)  # the runner goes back to the warm pool before the next submit
    return started - submitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--builds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-env-"))
    os.environ["KUBELAB_HOME"] = str(work / "home")
    os.environ.setdefault("KUBELAB_MACHINE_DIR", str(work / "machine"))
    os.environ["UV_OFFLINE"] = "1"
    wheels = work / "wheels"
    for name in PACKAGES:
        make_wheel(wheels, name, "1.0")
    lab = Experiments()
    lab.backend.warm_up(lab.home)
    plain = {"command": ["python", "-c", STARTED]}
    built = {**plain, "environment": {"packages": PACKAGES, "find_links": [str(wheels)]}}
    start_delay(lab, built)  # builds it once; every later run finds it built
    start_delay(lab, plain)
    without, within = [], []
    for _ in range(args.runs):  # interleaved, so both see the same machine
        without.append(start_delay(lab, plain))
        within.append(start_delay(lab, built))
    base, env = statistics.median(without), statistics.median(within)
    print(
        json.dumps(
            {
                "bench": "env_start",
                "plain_ms": round(base * 1000, 1),
                "built_ms": round(env * 1000, 1),
                "extra_ms": round((env - base) * 1000, 1),
                "ratio_start": round(env / base, 3),
            }
        )
    )

    uv, cache = uv_binary(), EnvironmentCache(work / "home")
    definition_of = {
        "format": 1,
        "python": ".".join(map(str, sys.version_info[:3])),
        "packages": PACKAGES,
        "find_links": [str(wheels)],
        "requirements": [],
        "files": {},
        "conda": None,
        "index_url": None,
    }
    ours, theirs = [], []
    for attempt in range(args.builds):
        venv = work / f"plain-{attempt}"
        subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
        start = time.perf_counter()
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--python",
                str(venv / "bin" / "python"),
                "--find-links",
                str(wheels),
                *PACKAGES,
            ],
            check=True,
        )
        theirs.append(time.perf_counter() - start)
        key = f"{attempt:016x}"
        start = time.perf_counter()
        cache.build(
            key, {**definition_of, "attempt": attempt}, _Log(work / f"build-{attempt}.log"), lambda: False
        )
        ours.append(time.perf_counter() - start)
    install, build = statistics.median(theirs), statistics.median(ours)
    print(
        json.dumps(
            {
                "bench": "env_build",
                "uv_pip_install_ms": round(install * 1000, 1),
                "kubelab_build_ms": round(build * 1000, 1),
                "ratio_build": round(build / install, 3),
            }
        )
    )


class _Log(io.TextIOWrapper):
    def __init__(self, path: Path) -> None:
        super().__init__(open(path, "wb"))  # noqa: SIM115 (closed with the benchmark's process)


if __name__ == "__main__":
    main()
