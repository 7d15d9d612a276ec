"""The worked example on the real control plane (tests/controlplane): the pipeline driver and
the sweep driver submit every step as Jobs with the Kubernetes backend, authenticated as the
notebook's ServiceAccount; the scheduler places the pods on a simulated node; this test plays
the containers (KWOK runs none): it writes what each script would report into the run
directory and ends the pod. Then the example's nightly schedule, added with the notebook's
token, is a CronJob in the user's namespace that fires and whose Job completes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane.cluster import ControlPlane
from kubelab_testing import manifest
from kubernetes import client, config

from kubelab.backends.kubernetes import cronjob
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.experiments import Experiments
from kubelab.pipelines.service import Pipelines
from kubelab.schedules.service import Schedules

ROLE_FILE = Path(__file__).resolve().parents[2] / "hub_config" / "rbac" / "notebook-role.yaml"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "pipelines.md"
PROJECT_LABEL = "lab.example.org/project"
pytestmark = pytest.mark.cluster


def user_namespace(admin: client.ApiClient) -> str:
    """A namespace as the spawner makes it: the notebook's ServiceAccount, Role and claims."""
    name = f"kl-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(admin)
    core.create_namespace(manifest({"metadata": {"name": name}}))
    for doc in yaml.safe_load_all(ROLE_FILE.read_text()):
        doc["metadata"]["namespace"] = name
        for subject in doc.get("subjects") or []:
            subject.update(name="notebook", namespace=name)
        create = (
            client.RbacAuthorizationV1Api(admin).create_namespaced_role
            if doc["kind"] == "Role"
            else client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding
        )
        create(name, doc)
    core.create_namespaced_service_account(name, manifest({"metadata": {"name": "notebook"}}))
    core.create_namespaced_persistent_volume_claim(
        name,
        manifest(
            {
                "metadata": {"name": "home-alice"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }
        ),
    )
    return name


@pytest.fixture
def admin(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(str(kubeconfig)) as api:
        yield api


@pytest.fixture
def on_cluster(
    simulated_cluster: ControlPlane,
    make_node: Callable[..., str],
    admin: client.ApiClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, NotebookEnv, Path]]:
    """The notebook's environment pointing at a fresh user namespace; (namespace, home, env)."""
    namespace = user_namespace(admin)
    make_node("pl", labels={PROJECT_LABEL: namespace})
    home = tmp_path / "home"
    nb = NotebookEnv(
        namespace=namespace,
        image="registry.example.org/lab/notebook:1",
        user="alice",
        home=str(home),
        node_selector={PROJECT_LABEL: namespace},
        volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "home-alice"}}],
        mounts=[{"name": "workspace", "mountPath": "/mnt/alice"}],
    )
    kubeconfig = simulated_cluster.write_kubeconfig(
        tmp_path / "notebook-kubeconfig",
        token=simulated_cluster.token_for(namespace, "notebook"),
        namespace=namespace,
    )
    for key, value in {
        **cronjob.notebook_environ(nb),
        "KUBECONFIG": str(kubeconfig),
        "KUBELAB_MACHINE_DIR": str(tmp_path / "machine"),
    }.items():
        monkeypatch.setenv(key, value)  # the drivers (subprocesses) inherit the notebook's environment
    monkeypatch.delenv("KUBELAB_PIPELINE_CRASH", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    yield namespace, nb, work
    client.CoreV1Api(admin).delete_namespace(namespace)


def pods(admin: client.ApiClient, namespace: str, selector: str) -> list[Any]:
    return [
        p
        for p in client.CoreV1Api(admin).list_namespaced_pod(namespace, label_selector=selector).items
        if not (p.metadata and p.metadata.deletion_timestamp)
    ]


def play_containers(
    simulated_cluster: ControlPlane,
    admin: client.ApiClient,
    namespace: str,
    home: Path,
    pipeline_id: str,
    pipelines: Pipelines,
) -> set[str]:
    """Until the pipeline ends: for each running pod, report what its script would, then end it."""
    ended: set[str] = set()
    deadline = time.monotonic() + 240
    while pipelines.record(pipelines.pipeline(pipeline_id))["status"] == "Running":
        assert time.monotonic() < deadline, pipelines.get(pipeline_id)
        for pod in pods(admin, namespace, f"kubelab.io/pipeline={pipeline_id}"):
            if pod.metadata.name in ended or pod.status.phase != "Running":
                continue
            run = home / "runs" / pod.metadata.labels["kubelab.io/experiment"]
            step = pod.metadata.labels["kubelab.io/pipeline-step"]
            params = json.loads((run / "spec.json").read_text())["params"]
            command = json.loads((run / "spec.json").read_text())["command"]
            if step == "tune":
                metrics = {"default": (params["lr"] - 0.03) ** 2 * 100 + 1 / params["epochs"]}
            elif step == "train":
                (run / "outputs" / "model.json").write_text(json.dumps(params))
                metrics = {"accuracy": 1 - abs(params["lr"] - 0.03)}
            else:  # evaluate: its command names train's outputs folder and accuracy
                words = command.split()
                model = json.loads((Path(words[2]) / "model.json").read_text())
                metrics = {"test_accuracy": float(words[3]) - 0.01, "epochs": model["epochs"]}
            with open(run / "metrics.jsonl", "a") as out:
                out.write(json.dumps({"step": 0, "metrics": metrics, "time": time.time()}) + "\n")
            simulated_cluster.end_pod(namespace, pod.metadata.name, "Succeeded")
            ended.add(pod.metadata.name)
        time.sleep(0.2)
    return ended


def test_the_worked_example_runs_as_jobs_and_its_cronjob_fires(
    simulated_cluster: ControlPlane, admin: client.ApiClient, on_cluster: tuple[str, NotebookEnv, Path]
) -> None:
    namespace, nb, work = on_cluster
    assert nb.home is not None
    home = Path(nb.home)
    spec = yaml.safe_load(DOCS.read_text().split("<!-- file: nightly.yml -->\n```yaml\n")[1].split("```")[0])
    pipelines = Pipelines(Experiments())
    assert pipelines.lab.backend.name == "kubernetes"
    for script in ("tune.py", "train.py", "evaluate.py"):
        (work / script).write_text("# run by the container\n")
    nightly = spec.pop("schedule")
    record = pipelines.create(spec, base_dir=work, params={"long_epochs": 5})
    ended = play_containers(simulated_cluster, admin, namespace, home, record["id"], pipelines)
    done = pipelines.get(record["id"])
    assert done["status"] == "Succeeded", done
    tune, train, evaluate = done["steps"]
    assert tune["record"]["best"]["params"] == {"lr": 0.03}
    assert (
        train["record"]["params"] == {"lr": 0.03, "epochs": 5} and train["record"]["backend"] == "kubernetes"
    )
    assert evaluate["record"]["metrics"] == {"test_accuracy": 0.99, "epochs": 5}
    jobs = (
        client.BatchV1Api(admin)
        .list_namespaced_job(namespace, label_selector=f"kubelab.io/pipeline={record['id']}")
        .items
    )
    steps = sorted(
        admin.sanitize_for_serialization(j)["metadata"]["labels"]["kubelab.io/pipeline-step"] for j in jobs
    )
    assert steps == ["evaluate", "train", "tune", "tune", "tune"] and len(ended) == 5  # each once

    # The nightly schedule on the cluster, created with the notebook's token: a CronJob (every
    # minute here, so the test can wait for its first fire).
    made = Schedules(Experiments()).create(
        None, {**spec, "schedule": {**nightly, "cron": "* * * * *"}}, base_dir=work, params={"long_epochs": 5}
    )
    assert made["kind"] == "pipeline" and made["fired_by"] == "cronjob"
    selector = f"kubelab.io/schedule={made['id']}"
    deadline = time.monotonic() + 150
    while not (fired := pods(admin, namespace, selector)) or fired[0].status.phase != "Running":
        assert time.monotonic() < deadline, "the CronJob did not fire"
        time.sleep(1)
    assert fired[0].spec.service_account_name == cronjob.account(made["id"])
    assert fired[0].spec.containers[0].command == ["kubelab", "schedule", "fire", made["id"]]
    simulated_cluster.end_pod(namespace, fired[0].metadata.name, "Succeeded")
    batch = client.BatchV1Api(admin)
    while not any(
        j.status and j.status.succeeded
        for j in batch.list_namespaced_job(namespace, label_selector=selector).items
    ):
        assert time.monotonic() < deadline + 60, "the CronJob's Job did not complete"
        time.sleep(0.5)
