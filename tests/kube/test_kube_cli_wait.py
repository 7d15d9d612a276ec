"""`kubelab run --wait` and `kubelab sweep --wait` on the real control plane, as a user types
them: the CLI is a subprocess with the notebook's environment (its token, namespace, node
selector) and no server, so nothing but the CLI itself watches the run. This test plays the
containers (KWOK runs none): it writes a pod's log, then tells KWOK how the pod ends; the
Job controller does the rest, and the CLI must return when the Job ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from kube_support import notebook_env, pods_of, running_pods, wait_for
from kubernetes import client

from kubelab.backends.kubernetes.cronjob import notebook_environ
from kubelab.records import RunDirectory

pytestmark = pytest.mark.cluster
Report = Callable[[RunDirectory], None]
DEADLINE = 120.0  # seconds a CLI may take after its Job ended (a loaded machine); it never returned


@dataclass
class Cli:
    """One `kubelab ...` subprocess, its output read once it exits."""

    process: subprocess.Popen[str]
    home: Path

    def run_id(self) -> str:
        """The run it submitted (its directory appears before the Job is created)."""

        def submitted() -> list[Path]:
            assert self.process.poll() is None, self.finish()
            return self.runs()

        return str(wait_for(submitted, timeout=DEADLINE, what="the run directory")[0].parent.name)

    def runs(self) -> list[Path]:
        return list((self.home / "runs").glob("*/spec.json"))

    def finish(self) -> tuple[int, str, str]:
        try:
            out, err = self.process.communicate(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            status = [p.read_text() for p in (self.home / "runs").glob("*/status.json")]
            raise AssertionError(f"the CLI did not return once the Job ended: {err}\n{status}") from None
        return self.process.returncode, out, err


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def kubelab(
    notebook_kubeconfig: Path, namespace: str, project_node: Callable[..., str], tmp_path: Path, work: Path
) -> Iterator[Callable[..., Cli]]:
    """Start `kubelab ARGS...` as the notebook would, with pods landing on this test's node."""
    project_node("wait")
    home = tmp_path / "cli-home"
    env = {
        **os.environ,
        **notebook_environ(notebook_env(namespace, home)),
        "KUBECONFIG": str(notebook_kubeconfig),
    }
    env.pop("KUBELAB_API_URL", None)
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> Cli:
        process = subprocess.Popen(
            [sys.executable, "-m", "kubelab.cli", *args],
            env=env,
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(process)
        return Cli(process, home)

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate()


def live_pods(admin: Any, namespace: str, run_id: str, count: int) -> list[dict[str, Any]]:
    return wait_for(
        lambda: (found := pods_of(admin, namespace, run_id)) and len(found) >= count and found,
        timeout=DEADLINE,
        what=f"{count} pod(s) of {run_id}",
    )


def test_run_wait_returns_when_its_job_completes(
    simulated_cluster: ControlPlane, admin: client.ApiClient, namespace: str, kubelab: Callable[..., Cli]
) -> None:
    cli = kubelab("run", "--wait", "--name", "cp", "--", "python", "-c", "pass")
    run_id = cli.run_id()
    (pod,) = live_pods(admin, namespace, run_id, 1)
    simulated_cluster.append_log(namespace, pod["metadata"]["name"], "hello from the pod")
    running_pods(admin, namespace, run_id, timeout=DEADLINE)
    simulated_cluster.wait_log_served(namespace, pod["metadata"]["name"], "hello from the pod")
    simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    code, out, err = cli.finish()
    assert code == 0, err
    assert "hello from the pod" in out  # it followed the pod's log, then saw the Job end
    assert f"{run_id} Succeeded: completed" in err
    run = RunDirectory(cli.home / "runs" / run_id)
    assert run.status().state == "Succeeded"
    assert "hello from the pod" in run.log_file(0).read_text()  # kept before the CLI exited


def test_logs_follow_returns_when_the_job_ends(
    simulated_cluster: ControlPlane, admin: client.ApiClient, namespace: str, kubelab: Callable[..., Cli]
) -> None:
    code, out, err = kubelab("run", "--", "python", "-c", "print('hi')").finish()
    assert code == 0, err
    run_id = out.strip()
    (pod,) = live_pods(admin, namespace, run_id, 1)
    simulated_cluster.append_log(namespace, pod["metadata"]["name"], "hi")
    running_pods(admin, namespace, run_id, timeout=DEADLINE)
    reader = kubelab("logs", "-f", run_id)
    simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    code, out, err = reader.finish()
    assert (code, out) == (0, "hi\n"), err


def test_run_wait_follows_every_replica_to_the_end(
    simulated_cluster: ControlPlane, admin: client.ApiClient, namespace: str, kubelab: Callable[..., Cli]
) -> None:
    cli = kubelab("run", "--wait", "--replicas", "2", "--framework", "pytorch", "--", "python", "-c", "pass")
    run_id = cli.run_id()
    pods = running_pods(admin, namespace, run_id, 2, timeout=DEADLINE)
    for pod in reversed(pods):  # replica 0, whose log the CLI follows, ends last
        simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    code, _, err = cli.finish()
    assert code == 0, err
    assert f"{run_id} Succeeded: completed" in err


def test_run_wait_sees_pods_that_end_as_they_start(
    simulated_cluster: ControlPlane, admin: client.ApiClient, namespace: str, kubelab: Callable[..., Cli]
) -> None:
    """Told to succeed before they are even scheduled: KWOK ends them as soon as they run, so
    the CLI's first look may already find the Job complete."""
    cli = kubelab("run", "--wait", "--replicas", "2", "--framework", "pytorch", "--", "python", "-c", "pass")
    run_id = cli.run_id()
    for pod in live_pods(admin, namespace, run_id, 2):
        simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    code, _, err = cli.finish()
    assert code == 0, err
    assert f"{run_id} Succeeded: completed" in err


@pytest.mark.parametrize("output", ["text", "json"])
def test_run_wait_returns_the_failure(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    namespace: str,
    kubelab: Callable[..., Cli],
    output: str,
) -> None:
    json_out = ["-o", "json"] if output == "json" else []
    cli = kubelab("run", "--wait", *json_out, "--", "python", "-c", "raise SystemExit(3)")
    run_id = cli.run_id()
    (pod,) = running_pods(admin, namespace, run_id, timeout=DEADLINE)
    simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Failed", exit_code=3)
    code, out, err = cli.finish()
    assert code == 1, err
    if output == "json":
        record = json.loads(out)
        assert (record["status"], record["exit_code"]) == ("Failed", 3)
        assert record["reason"].startswith("replica 0 exited with code 3"), record
    else:
        assert f"{run_id} Failed: replica 0 exited with code 3" in err


def end_each_pod(cluster: Any, admin: Any, namespace: str, cli: Cli, count: int, report: Report) -> None:
    """Play the containers of the runs a driver submits: once a pod runs, `report` into its
    run directory what its script would, then end it; until `count` pods ended."""
    ended: set[str] = set()

    def play() -> bool:
        assert cli.process.poll() is None, cli.finish()
        for spec_file in cli.runs():
            for pod in pods_of(admin, namespace, spec_file.parent.name):
                name = pod["metadata"]["name"]
                if name in ended or pod["status"].get("phase") != "Running":
                    continue
                report(RunDirectory(spec_file.parent))
                cluster.end_pod(namespace, name, "Succeeded")
                ended.add(name)
        return len(ended) == count

    wait_for(play, timeout=DEADLINE, what=f"{count} pods running")


def test_sweep_wait_returns_when_its_trial_jobs_end(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    namespace: str,
    kubelab: Callable[..., Cli],
    work: Path,
) -> None:
    """The sweep's driver (a process the CLI starts) follows the trials' Jobs."""
    spec = {
        "name": "lr",
        "space": {"lr": {"_type": "choice", "_value": [0.1, 0.3]}},
        "tuner": "grid",
        "objective": {"metric": "loss", "direction": "minimize"},
        "max_trials": 2,
        "concurrency": 2,
        "trial": {"command": "python -c pass"},
    }
    (work / "sweep.json").write_text(json.dumps(spec))
    cli = kubelab("sweep", "-f", "sweep.json", "--wait", "-o", "json")

    def report(run: RunDirectory) -> None:
        point = {"step": 0, "metrics": {"loss": run.spec()["params"]["lr"]}, "time": time.time()}
        (run.path / "metrics.jsonl").write_text(json.dumps(point) + "\n")

    end_each_pod(simulated_cluster, admin, namespace, cli, 2, report)
    code, out, err = cli.finish()
    assert code == 0, err
    record = json.loads(out)
    assert record["status"] == "Succeeded", record
    assert record["best"]["params"] == {"lr": 0.1}, record


def test_pipeline_wait_returns_when_its_step_jobs_end(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    namespace: str,
    kubelab: Callable[..., Cli],
    work: Path,
) -> None:
    """The pipeline's driver submits step b's Job once step a's ended, and `--wait` returns
    when b's ends."""
    step = {"command": "python -c pass"}
    spec = {
        "name": "ab",
        "steps": [
            {"name": "a", "experiment": step},
            {"name": "b", "depends_on": ["a"], "experiment": step},
        ],
    }
    (work / "pipeline.json").write_text(json.dumps(spec))
    cli = kubelab("pipeline", "run", "-f", "pipeline.json", "--wait", "-o", "json")
    end_each_pod(simulated_cluster, admin, namespace, cli, 2, lambda run: None)
    code, out, err = cli.finish()
    assert code == 0, err
    record = json.loads(out)
    assert record["status"] == "Succeeded", record
    assert [s["state"] for s in record["steps"]] == ["succeeded", "succeeded"], record


def test_run_wait_prints_a_log_that_came_after_its_stream_opened(
    simulated_cluster: ControlPlane, admin: client.ApiClient, namespace: str, kubelab: Callable[..., Cli]
) -> None:
    """The CLI opens the log stream of a running pod before the node serves its log (KWOK reads
    a new `Logs` object a moment later; a kubelet that restarts also closes streams): the stream
    closes early, and the CLI must open it again rather than miss what the pod prints next."""
    cli = kubelab("run", "--wait", "--name", "cp", "--", "python", "-c", "pass")
    run_id = cli.run_id()
    (pod,) = running_pods(admin, namespace, run_id, timeout=DEADLINE)
    wait_for(
        lambda: RunDirectory(cli.home / "runs" / run_id).status().state == "Running",
        timeout=DEADLINE,
        what="the CLI saw the run running",
    )
    simulated_cluster.append_log(namespace, pod["metadata"]["name"], "hello from the pod")
    simulated_cluster.wait_log_served(namespace, pod["metadata"]["name"], "hello from the pod")
    simulated_cluster.end_pod(namespace, pod["metadata"]["name"], "Succeeded")
    code, out, err = cli.finish()
    assert code == 0, err
    assert "hello from the pod" in out, (out, err)
