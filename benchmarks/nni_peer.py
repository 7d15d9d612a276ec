"""NNI's local mode on one search space, timed: run by the NNI peer's own Python.

Imports nothing of kubelab. Reads a JSON job on stdin (`trial` source, `args`, `space`,
`trials`, `concurrency`, `tuner`), runs the experiment in a temporary folder with a free port,
and prints `{"seconds": ...}` from `run()` to its return (every trial finished).
"""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import time
from pathlib import Path

from nni.experiment import Experiment  # type: ignore[import-not-found]  # NNI itself, in its own venv


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    job = json.load(sys.stdin)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "trial.py").write_text(job["trial"])
        experiment = Experiment("local")
        config = experiment.config
        config.experiment_working_directory = str(Path(tmp) / "nni-experiments")
        config.trial_command = " ".join([sys.executable, "trial.py", *job["args"]])
        config.trial_code_directory = tmp
        config.search_space = job["space"]
        config.max_trial_number, config.trial_concurrency = job["trials"], job["concurrency"]
        config.tuner.name, config.tuner.class_args = job["tuner"], {"optimize_mode": "minimize"}
        start = time.perf_counter()
        finished = experiment.run(free_port())
        seconds = time.perf_counter() - start
        experiment.stop()
    print(json.dumps({"seconds": seconds, "finished": bool(finished)}), flush=True)


if __name__ == "__main__":
    main()
