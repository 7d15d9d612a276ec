"""A schedule on Kubernetes: the pure builder of its CronJob and least-privilege
ServiceAccount (checked against the official schemas), and `kubelab schedule fire`, the
command the CronJob runs, exercised on the local backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from kubelab.backends.kubernetes import cronjob
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.schedules.scheduler import fire_once
from kubelab.schedules.service import Schedules
from kubelab.schedules.spec import Schedule, parse_schedule

ROLE_FILE = Path(__file__).resolve().parents[2] / "hub_config" / "rbac" / "notebook-role.yaml"
NB = NotebookEnv(
    namespace="kubelab-alice",
    image="registry.example/kubelab-notebook:1.2",
    user="alice",
    home="/mnt/alice/.kubelab",
    service_account="notebook",
    volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "alice-workspace"}}],
    mounts=[{"name": "workspace", "mountPath": "/mnt/alice"}],
    node_selector={"pool": "cpu"},
    uid=1000,
    gid=100,
)


def schedule(**fields: Any) -> Schedule:
    parsed, errors = parse_schedule({"cron": "0 2 * * *", "timezone": "Europe/Berlin", **fields})
    assert not errors and parsed is not None
    return parsed


@pytest.mark.parametrize(
    ("concurrency", "policy"), [("forbid", "Forbid"), ("allow", "Allow"), ("replace", "Replace")]
)
def test_the_cronjob_and_its_service_account(concurrency: str, policy: str) -> None:
    objects = cronjob.build(
        "1m8abcdefghk", "Nightly Tune & Train!", schedule(concurrency=concurrency), True, NB
    )
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Role", "RoleBinding", "CronJob"]
    for obj in objects:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
        assert obj["metadata"]["namespace"] == "kubelab-alice"
    account, role, binding, job = objects
    verbs = {(r["apiGroups"][0], res): set(r["verbs"]) for r in role["rules"] for res in r["resources"]}
    assert set(verbs) == {("batch", "jobs"), ("", "services"), ("", "pods"), ("", "pods/log"), ("", "events")}
    assert not any("*" in v for v in verbs.values()) and ("", "secrets") not in verbs
    notebook = next(d for d in yaml.safe_load_all(ROLE_FILE.read_text()) if d["kind"] == "Role")
    held = {
        (g, res): set(r["verbs"]) for r in notebook["rules"] for g in r["apiGroups"] for res in r["resources"]
    }
    assert all(v <= held[k] for k, v in verbs.items())  # the notebook may bind it: a subset of its rights
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "kubelab-alice"}
    ]
    spec = job["spec"]
    assert (spec["schedule"], spec["timeZone"], spec["concurrencyPolicy"], spec["suspend"]) == (
        "0 2 * * *",
        "Europe/Berlin",
        policy,
        True,
    )
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == NB.image and container["command"] == [
        "kubelab",
        "schedule",
        "fire",
        "1m8abcdefghk",
    ]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KUBELAB_BACKEND"] == "kubernetes" and env["KUBELAB_HOME"] == "/mnt/alice/.kubelab"
    # What the fire submits inherits the notebook's defaults, read back as the notebook reads them.
    read = NotebookEnv.from_environ(env, namespace_file=Path("/nonexistent/namespace"))
    assert replace(read, uid=NB.uid, gid=NB.gid) == NB  # uid and gid come from the process
    assert container["volumeMounts"] == NB.mounts and pod["volumes"] == NB.volumes
    assert pod["serviceAccountName"] == account["metadata"]["name"] == "kubelab-schedule-1m8abcdefghk"
    assert {role["metadata"]["name"], binding["roleRef"]["name"]} == {account["metadata"]["name"]}
    # the `restricted` Pod Security level: non-root, no escalation, no capabilities, a seccomp profile
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    name = job["metadata"]["name"]
    assert name == "nightly-tune-train-1m8abcdefghk" and len(name) <= 52


def test_what_a_cronjob_cannot_express_is_refused_by_field() -> None:
    with pytest.raises(ValidationError) as caught:
        cronjob.build("1m8abcdefghk", "x", schedule(cron="*/10 * * * * *"), False, NotebookEnv())
    assert [f.path for f in caught.value.fields] == ["schedule.cron", "image", "namespace", "KUBELAB_HOME"]


def test_fire_honours_paused_bounds_and_concurrency(pipeline_env: Path) -> None:
    (pipeline_env / "job.py").write_text(
        "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\n"
    )
    lab = Experiments()
    schedules = Schedules(lab)
    made = schedules.create(
        None,
        {"command": ["python", "job.py"], "schedule": {"cron": "0 2 * * *", "end": "2030-01-01T00:00:00Z"}},
        start_scheduler=False,
    )
    first = fire_once(lab.home, made["id"])
    assert first["state"] == "started"
    second = fire_once(lab.home, made["id"])  # forbid: the first still runs
    assert second["state"] == "skipped" and first["id"] in second["reason"]
    (pipeline_env / "go").touch()
    late = fire_once(lab.home, made["id"], clock=lambda: 1_900_000_000.0)  # 2030-03: after the end
    assert late["state"] == "skipped" and "outside" in late["reason"]
    schedules.pause(made["id"])
    assert fire_once(lab.home, made["id"])["reason"] == "the schedule is paused"
    assert [f["state"] for f in schedules.list()[0]["fires"]] == ["started", "skipped", "skipped", "skipped"]


def test_schedule_fire_follows_a_pipeline_to_its_end_and_render_prints_the_cronjob(
    pipeline_env: Path,
) -> None:
    (pipeline_env / "flow.json").write_text(
        json.dumps(
            {
                "name": "flow",
                "steps": [
                    {"name": "a", "experiment": {"command": ["python", "-c", "pass"]}},
                    {"name": "b", "depends_on": ["a"], "experiment": {"command": ["python", "-c", "pass"]}},
                ],
                "schedule": {"cron": "0 2 * * *"},
            }
        )
    )
    made = Schedules(Experiments()).create(
        None,
        json.loads((pipeline_env / "flow.json").read_text()),
        base_dir=pipeline_env,
        start_scheduler=False,
    )
    fired = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "schedule", "fire", made["id"], "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert fired.returncode == 0, fired.stderr
    from kubelab.pipelines.service import Pipelines

    record = Pipelines(Experiments()).get(json.loads(fired.stdout)["id"])
    assert record["status"] == "Succeeded" and record["schedule"] == made["id"]  # it waited for the end
    env = {
        **os.environ,
        "KUBELAB_NAMESPACE": "ns",
        "KUBELAB_IMAGE": "img:1",
        "KUBELAB_HOME": "/mnt/u/.kubelab",
    }
    rendered = subprocess.run(
        [sys.executable, "-m", "kubelab.cli", "schedule", "render", "-f", "flow.json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert rendered.returncode == 0, rendered.stderr
    assert [o["kind"] for o in json.loads(rendered.stdout)][-1] == "CronJob"


def test_a_pipeline_steps_jobs_carry_its_labels() -> None:
    from kubelab.backends.kubernetes import builders
    from kubelab.spec import ExperimentSpec

    spec = ExperimentSpec.parse({"command": ["python", "train.py"], "name": "train"})
    target = builders.Target(
        run_id="1m8abcdefghk",
        run_dir="/mnt/alice/.kubelab/runs/1m8abcdefghk",
        name="train-1m8abcdefghk",
        user="alice",
        namespace="kubelab-alice",
        pipeline="1m8pipelinexx",
        pipeline_step="train",
    )
    (job,) = builders.build(spec, target, NB)
    kubernetes_validate.validate(job, kubernetes_validate.latest_version(), strict=True)
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        assert (
            labels["kubelab.io/pipeline"] == "1m8pipelinexx" and labels["kubelab.io/pipeline-step"] == "train"
        )
