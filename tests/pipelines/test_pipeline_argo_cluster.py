"""`engine: argo` on the real control plane (tests/controlplane), with the Workflow CRD written
from Argo's documented API (controlplane/crds.py).

There is no Argo controller here, so nothing runs the Workflow: the test checks the object
the notebook's token created (DAG, dependencies, retries, image), that its task pods pass the
namespace's `restricted` Pod Security level (created with a server dry-run, as the controller
would create them), and then plays the controller: it runs each task's command, `kubelab
pipeline step ID STEP`, as a subprocess with the notebook's kubeconfig and environment, in
dependency order (the two independent steps at once, and a failed attempt run again as
`retryStrategy` would), while it plays the containers of the step Jobs on a simulated node
(reporting metrics into the run directory, ending the pod through KWOK). The docs' worked
example (a sweep, train with its best params, evaluate) runs the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_pipeline_cluster as worked_example
import yaml
from controlplane.cluster import ControlPlane
from controlplane.crds import WORKFLOW_CRD
from kubelab_testing import manifest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.pipelines import argo_workflow
from kubelab.pipelines.service import Pipelines
from kubelab.schedules.service import Schedules

pytestmark = pytest.mark.cluster
admin, on_cluster = worked_example.admin, worked_example.on_cluster  # its fixtures: the notebook's namespace
pods = worked_example.pods
KUBELAB = str(Path(sys.executable).parent / "kubelab")
SPEC = {
    "name": "argo-flow",
    "engine": "argo",
    "steps": [
        {"name": "prep", "outputs": ["rows"], "experiment": {"command": "python prep.py"}},
        {
            "name": "train_a",
            "depends_on": ["prep"],
            "retries": 1,
            "outputs": ["acc"],
            "experiment": {"command": "python train.py {{ steps.prep.metrics.rows }} a"},
        },
        {
            "name": "train_b",
            "depends_on": ["prep"],
            "experiment": {"command": "python train.py {{ steps.prep.metrics.rows }} b"},
        },
        {
            "name": "evaluate",
            "depends_on": ["train_a", "train_b"],
            "experiment": {
                "command": "python eval.py {{ steps.train_a.metrics.acc }} {{ steps.train_b.outputs }}"
            },
        },
    ],
}


@pytest.fixture
def argo_served(simulated_cluster: ControlPlane) -> Iterator[None]:
    simulated_cluster.install_crd(WORKFLOW_CRD)
    yield
    simulated_cluster.remove_crd("workflows.argoproj.io")


def workflow(admin: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found = client.CustomObjectsApi(admin).get_namespaced_custom_object(
        "argoproj.io", "v1alpha1", namespace, "workflows", name
    )
    assert isinstance(found, dict), found
    return found


def start_step(pipeline_id: str, step: str) -> subprocess.Popen[str]:
    """A task pod's command, with the notebook's environment (KUBECONFIG = its token)."""
    return subprocess.Popen(
        [KUBELAB, "pipeline", "step", pipeline_id, step],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def play(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    namespace: str,
    home: Path,
    pipeline_id: str,
    outcomes: dict[str, tuple[str, dict[str, Any]]],
    wanted: int,
) -> None:
    """End `wanted` step pods (each step's pod as `outcomes[step]` says), all in one sweep once
    they are all running, so the steps' ledger writes race."""
    deadline = time.monotonic() + 120
    while True:
        running = [
            p
            for p in pods(admin, namespace, f"kubelab.io/pipeline={pipeline_id}")
            if p.status.phase == "Running"
        ]
        if len(running) >= wanted:
            break
        assert time.monotonic() < deadline, [p.metadata.name for p in running]
        time.sleep(0.2)
    for pod in running:
        outcome, metrics = outcomes[pod.metadata.labels["kubelab.io/pipeline-step"]]
        run = home / "runs" / pod.metadata.labels["kubelab.io/experiment"]
        (run / "outputs" / "model.txt").write_text(pod.metadata.name)
        with open(run / "metrics.jsonl", "a") as out:
            out.write(json.dumps({"step": 0, "metrics": metrics, "time": time.time()}) + "\n")
    for pod in running:
        simulated_cluster.end_pod(
            namespace, pod.metadata.name, outcomes[pod.metadata.labels["kubelab.io/pipeline-step"]][0]
        )


def finish(process: subprocess.Popen[str], expect: int | None = None) -> tuple[int, str]:
    out, _ = process.communicate(timeout=120)
    assert expect is None or process.returncode == expect, out
    return process.returncode, out


def test_a_pipeline_submitted_as_a_workflow_runs_step_by_step(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    on_cluster: tuple[str, NotebookEnv, Path],
    argo_served: None,
) -> None:
    namespace, nb, work = on_cluster
    assert nb.home is not None
    home = Path(nb.home)
    for script in ("prep.py", "train.py", "eval.py"):
        (work / script).write_text("# run by the container\n")
    pipelines = Pipelines(Experiments())
    record = pipelines.create(SPEC, base_dir=work)
    pid = record["id"]
    assert record["engine"] == "argo" and record["workflow"] == f"kubelab-pipeline-{pid}"
    assert record["status"] == "Running" and pipelines.pipeline(pid).read_state().driver_pid is None
    pipelines.list()  # a Running argo pipeline gets no driver: its tasks run the steps
    assert not pipelines.pipeline(pid).driver_alive()

    made = workflow(admin, namespace, record["workflow"])
    tasks = {t["name"]: t.get("dependencies", []) for t in made["spec"]["templates"][0]["dag"]["tasks"]}
    assert tasks == {
        "step-prep": [],
        "step-train-a": ["step-prep"],
        "step-train-b": ["step-prep"],
        "step-evaluate": ["step-train-a", "step-train-b"],
    }
    templates = {t["name"]: t for t in made["spec"]["templates"][1:]}
    assert templates["step-train-a"]["retryStrategy"]["limit"] == 1
    assert {t["container"]["image"] for t in templates.values()} == {nb.image}
    assert templates["step-evaluate"]["container"]["command"] == [
        "kubelab",
        "pipeline",
        "step",
        pid,
        "evaluate",
    ]

    # The task pods as the controller would create them, judged by Pod Security admission.
    client.CoreV1Api(admin).patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    core = client.CoreV1Api(admin)
    for name in ("prep", "train_a", "train_b", "evaluate"):
        core.create_namespaced_pod(namespace, manifest(argo_workflow.task_pod(made, name)), dry_run="All")
    loose = argo_workflow.task_pod(made, "prep")
    loose["spec"]["containers"][0].pop("securityContext")
    with pytest.raises(ApiException) as refused:  # the level is enforced: the check can fail
        core.create_namespaced_pod(namespace, manifest(loose), dry_run="All")
    assert refused.value.status == 403 and "restricted" in str(refused.value.body)

    # A task that runs before its dependencies succeeded waits (Argo never does this).
    code, out = finish(start_step(pid, "evaluate"))
    assert code == 1 and "waits for train_a, train_b" in out, out

    step = start_step(pid, "prep")
    play(simulated_cluster, admin, namespace, home, pid, {"prep": ("Succeeded", {"rows": 120})}, 1)
    finish(step, 0)

    # train_a and train_b at once; train_a's first attempt fails, and its retry is another pod.
    first = [start_step(pid, "train_a"), start_step(pid, "train_b")]
    play(
        simulated_cluster,
        admin,
        namespace,
        home,
        pid,
        {"train_a": ("Failed", {}), "train_b": ("Succeeded", {"acc": 0.8})},
        2,
    )
    assert [finish(p)[0] for p in first] == [1, 0]
    state = pipelines.pipeline(pid).read_state()
    assert state.steps["train_b"].state == "succeeded"  # neither write lost the other's
    assert (
        state.steps["train_a"].state == "waiting"
        and "retrying after attempt 1" in state.steps["train_a"].reason
    )
    retry = start_step(pid, "train_a")
    play(simulated_cluster, admin, namespace, home, pid, {"train_a": ("Succeeded", {"acc": 0.9})}, 1)
    finish(retry, 0)

    step = start_step(pid, "evaluate")
    play(simulated_cluster, admin, namespace, home, pid, {"evaluate": ("Succeeded", {"score": 1})}, 1)
    finish(step, 0)

    done = pipelines.get(pid)
    assert done["status"] == "Succeeded" and done["reason"] == "4 steps succeeded", done
    steps = {s["name"]: s for s in done["steps"]}
    assert steps["train_a"]["attempt"] == 2 and len(steps["train_a"]["previous"]) == 1

    def command(step: str) -> str:  # as submitted, templates filled from the earlier steps' records
        return str(json.loads((home / "runs" / steps[step]["id"] / "spec.json").read_text())["command"])

    assert command("train_a") == "python train.py 120 a" and command("train_b") == "python train.py 120 b"
    train_b_outputs = home / "runs" / steps["train_b"]["id"] / "outputs"
    assert command("evaluate") == f"python eval.py 0.9 {train_b_outputs}"
    assert steps["evaluate"]["record"]["backend"] == "kubernetes"
    assert all(s["state"] == "succeeded" for s in steps.values())
    show = subprocess.run(
        [KUBELAB, "pipeline", "show", pid], env=dict(os.environ), capture_output=True, text=True, timeout=60
    )
    assert "Succeeded" in show.stdout and "evaluate" in show.stdout, show.stderr


def test_stop_terminates_the_workflow_and_resume_is_refused(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    on_cluster: tuple[str, NotebookEnv, Path],
    argo_served: None,
) -> None:
    namespace, nb, work = on_cluster
    (work / "prep.py").write_text("# run by the container\n")
    pipelines = Pipelines(Experiments())
    record = pipelines.create(SPEC, base_dir=work)
    pid = record["id"]
    step = start_step(pid, "prep")
    deadline = time.monotonic() + 120
    while not any(p.status.phase == "Running" for p in pods(admin, namespace, f"kubelab.io/pipeline={pid}")):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    stopped = pipelines.stop(pid)
    assert stopped["status"] == "Stopped", stopped
    assert {s["state"] for s in stopped["steps"]} == {"stopped"}
    assert workflow(admin, namespace, record["workflow"])["spec"]["shutdown"] == "Terminate"
    code, out = finish(step)  # the task's command sees the stop, writes nothing more
    assert code == 1, out
    assert pipelines.pipeline(pid).read_state().status == "Stopped"
    with pytest.raises(ValidationError) as refused:
        pipelines.resume(pid)
    assert refused.value.fields[0].path == "engine" and "argo retry" in refused.value.fields[0].reason


def test_a_schedule_of_an_argo_pipeline_is_refused_by_name(
    on_cluster: tuple[str, NotebookEnv, Path], argo_served: None
) -> None:
    """A schedule's fire runs under an account that may not submit Workflows: refused up front."""
    namespace, nb, work = on_cluster
    (work / "prep.py").write_text("# run by the container\n")
    schedules = Schedules(Experiments())
    with pytest.raises(ValidationError) as refused:
        schedules.create(None, {**SPEC, "schedule": {"cron": "0 2 * * *"}}, base_dir=work)
    assert [f.path for f in refused.value.fields] == ["engine"]
    assert "engine: driver" in refused.value.fields[0].reason and schedules.all() == []


def test_the_worked_example_runs_as_a_workflows_tasks(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    on_cluster: tuple[str, NotebookEnv, Path],
    argo_served: None,
) -> None:
    """docs/pipelines.md's nightly example with `engine: argo`: the tune sweep's trials, then
    train with `{{ steps.tune.best.params.lr }}`, then evaluate, each step a task's command
    (run in order by a thread, as the controller would), the containers played as in
    test_pipeline_cluster.py, with the same results as under the driver."""
    namespace, nb, work = on_cluster
    assert nb.home is not None
    home = Path(nb.home)
    spec = yaml.safe_load(
        worked_example.DOCS.read_text().split("<!-- file: nightly.yml -->\n```yaml\n")[1].split("```")[0]
    )
    spec.pop("schedule")
    for script in ("tune.py", "train.py", "evaluate.py"):
        (work / script).write_text("# run by the container\n")
    pipelines = Pipelines(Experiments())
    record = pipelines.create({**spec, "engine": "argo"}, base_dir=work, params={"long_epochs": 5})
    codes: dict[str, int] = {}

    def controller() -> None:
        for step in ("tune", "train", "evaluate"):
            codes[step] = finish(start_step(record["id"], step))[0]

    tasks = threading.Thread(target=controller)
    tasks.start()
    ended = worked_example.play_containers(simulated_cluster, admin, namespace, home, record["id"], pipelines)
    tasks.join(timeout=120)
    assert codes == {"tune": 0, "train": 0, "evaluate": 0}
    done = pipelines.get(record["id"])
    assert done["status"] == "Succeeded" and done["engine"] == "argo", done
    tune, train, evaluate = done["steps"]
    assert tune["record"]["best"]["params"] == {"lr": 0.03}
    assert (
        train["record"]["params"] == {"lr": 0.03, "epochs": 5} and train["record"]["backend"] == "kubernetes"
    )
    assert evaluate["record"]["metrics"] == {"test_accuracy": 0.99, "epochs": 5}
    assert len(ended) == 5  # three trials, train, evaluate: each once
