"""The init container's command (`python -m kubelab.environments.init_run RUN_DIR`) over a real
run directory and a real git repository: the steps land in the run's code folder, a retried pod
does nothing again, and a failure's reason is its termination message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kubelab.environments import init_run
from kubelab.records import PENDING, RunDirectory, Status


def git(*argv: str, cwd: Path) -> str:
    done = subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_run(home: Path, init: list[dict[str, object]]) -> RunDirectory:
    spec = {"command": ["python", "train.py"], "init": init}
    return RunDirectory.create(home / "runs", spec, Status(state=PENDING, reason="submitted"))


def test_the_steps_run_once_in_the_run_code_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "--quiet", "-b", "main", cwd=repo)
    (repo / "train.py").write_text("print('first')\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-m", "one", cwd=repo)
    first = git("rev-parse", "HEAD", cwd=repo)
    (repo / "train.py").write_text("print('second')\n")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-am", "two", cwd=repo)
    run = make_run(
        tmp_path / "home",
        [
            {"git": {"url": str(repo), "revision": first}, "path": "src"},
            {"file": {"filename": "a.txt", "content": "x"}},
        ],
    )
    message = tmp_path / "termination-log"
    assert init_run.main([str(run.path)], termination_log=message) == 0
    assert (run.code_dir / "src" / "train.py").read_text() == "print('first')\n"
    assert (run.code_dir / "a.txt").read_text() == "x" and not message.exists()  # no pod: no file made
    assert "kubelab: cloning" in (run.logs_dir / "build.log").read_text()
    # a retried pod finds them done (doing the clone again would fail: src/ exists)
    assert init_run.main([str(run.path)], termination_log=message) == 0


def test_a_failing_step_is_the_termination_message(tmp_path: Path) -> None:
    run = make_run(tmp_path / "home", [{"git": {"url": str(tmp_path / "missing.git")}}])
    message = tmp_path / "termination-log"
    message.touch()  # as the kubelet makes it
    done = subprocess.run(
        [sys.executable, "-m", "kubelab.environments.init_run", str(run.path)], capture_output=True, text=True
    )
    assert done.returncode == 1 and done.stderr.startswith("init[0].git: ")
    assert init_run.main([str(run.path)], termination_log=message) == 1
    assert message.read_text() == done.stderr.strip() and "missing.git" in message.read_text()
    assert not (run.path / init_run.DONE).exists()
    assert init_run.main([], termination_log=message) == 2


def test_an_artifacts_step_copies_an_earlier_runs_outputs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    earlier = make_run(home, [])
    (earlier.outputs_dir / "model.pt").write_text("weights")
    run = make_run(home, [{"artifacts": {"run": earlier.path.name, "files": ["model.pt"]}, "path": "w"}])
    message = tmp_path / "termination-log"
    assert init_run.main([str(run.path)], termination_log=message) == 0
    assert (run.code_dir / "w" / "model.pt").read_text() == "weights"
    missing = make_run(home, [{"artifacts": {"run": earlier.path.name, "files": ["gone.pt"]}}])
    assert (
        init_run.init_run(missing.path)
        == f"init[0].artifacts.files: 'gone.pt' is not in the outputs of run {earlier.path.name}"
    )
