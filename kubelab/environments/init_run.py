"""`python -m kubelab.environments.init_run RUN_DIR`: a run's init steps, done off the runner.

On Kubernetes a run's Job has an init container (`backends/kubernetes/init_container.py`) that
runs this in the notebook's image over the run directory on the workspace, before the training
container starts: the same `run_steps` the local runner calls, with the same credentials (the
workspace's `$KUBELAB_HOME/git-credentials`, a path, never a value in the manifest). The log goes
to the run's build log; a failure's reason (its field and git's line, credentials redacted) is
the container's termination message, which the run's state then names. A retried pod finds
`init.done` and does nothing again.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from kubelab.environments.cache import BuildFailed
from kubelab.environments.init_steps import run_steps
from kubelab.environments.prepare import BUILD_LOG
from kubelab.records import RunDirectory
from kubelab.spec import ExperimentSpec

DONE = "init.done"  # in the run directory: the steps are done (a retried pod skips them)
TERMINATION_LOG = Path("/dev/termination-log")  # the kubelet's default terminationMessagePath


def init_run(run_dir: Path) -> str | None:
    """Do the run's init steps once; the reason they failed, or None."""
    run = RunDirectory(run_dir)
    done = run.path / DONE
    if done.exists():
        return None
    spec = ExperimentSpec.parse(run.spec())
    run.logs_dir.mkdir(parents=True, exist_ok=True)
    run.code_dir.mkdir(exist_ok=True)
    with open(run.logs_dir / BUILD_LOG, "a") as log:
        try:
            run_steps(spec.init, run.code_dir, run.path.parent.parent, log, lambda: False)
        except BuildFailed as exc:
            log.write(f"kubelab: {exc}\n")
            return str(exc)
    done.touch()
    return None


def main(argv: list[str], termination_log: Path = TERMINATION_LOG) -> int:
    if len(argv) != 1:
        print("usage: python -m kubelab.environments.init_run RUN_DIR", file=sys.stderr)
        return 2
    reason = init_run(Path(argv[0]))
    if reason is None:
        return 0
    print(reason, file=sys.stderr)
    if termination_log.is_file():  # the kubelet makes it in each container; elsewhere stderr says it
        with contextlib.suppress(OSError):  # else the kubelet takes stderr (FallbackToLogsOnError)
            termination_log.write_text(reason)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
