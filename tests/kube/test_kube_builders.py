"""Pure manifest builders: every manifest kubelab can produce passes the official schemas,
and the distributed environment equals the local backend's for every rank."""

from __future__ import annotations

import json
import re
from typing import Any

import kubernetes_validate
import pytest

from kubelab.backends.distributed import replica_env
from kubelab.backends.kubernetes import builders, names, states
from kubelab.backends.kubernetes.distributed_env import topology
from kubelab.backends.kubernetes.init_container import INIT_CONTAINER
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.spec import ExperimentSpec

K8S_VERSION = kubernetes_validate.latest_version()
NB = NotebookEnv(
    namespace="alice",
    image="registry.example.org/lab/notebook:1",
    user="alice@example.org",
    node_selector={"lab/project": "vision"},
    tolerations=[{"key": "lab/dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    volumes=[{"name": "workspace", "persistentVolumeClaim": {"claimName": "home-alice"}}],
    mounts=[{"name": "workspace", "mountPath": "/mnt/alice", "subPath": "alice"}],
    shm="4G",
    home="/mnt/alice/.kubelab",
)
BASE = {
    "command": "python train.py --lr {{ lr }}",
    "params": {"lr": 0.1},
    "resources": {"cpu": "4", "memory": "16Gi", "gpus": 2, "gpu_type": "A100"},
    "workdir": "/mnt/alice/project",
    "retries": 2,
    "timeout": "2h",
    "env": {"SEED": "1"},
}
SHAPES: dict[str, dict[str, Any]] = {
    "single": {},
    "single-cpu-only": {"resources": {"cpu": "1"}, "retries": 0, "timeout": None},
    "pytorch-4": {"framework": "pytorch", "replicas": 4},
    "tensorflow-ps": {"framework": "tensorflow", "replicas": 3, "parameter_servers": 2},
    "tensorflow-1-with-ps": {"framework": "tensorflow", "replicas": 1, "parameter_servers": 1},
    "paddle-3": {"framework": "paddle", "replicas": 3},
    "queued": {"queue": "team-a", "framework": "pytorch", "replicas": 2},
    "kubeflow-pytorch": {"engine": "kubeflow", "framework": "pytorch", "replicas": 4, "queue": "team-a"},
    "kubeflow-elastic": {"engine": "kubeflow", "framework": "pytorch", "replicas": "2:4"},
    "elastic-job": {"framework": "pytorch", "replicas": "2:4"},
    "kubeflow-tensorflow": {
        "engine": "kubeflow",
        "framework": "tensorflow",
        "replicas": 2,
        "parameter_servers": 1,
    },
    "sweep-code-source": {
        "code": {"source": "print(1)\n" * 5000, "filename": "cell.py"},
        "command": ["python", "cell.py"],
    },
}


def spec_of(shape: str) -> ExperimentSpec:
    data = {**BASE, **SHAPES[shape]}
    return ExperimentSpec.parse({k: v for k, v in data.items() if v is not None})


def target(spec: ExperimentSpec, run_id: str = "0123456789ab") -> builders.Target:
    owner = names.owner_hash("alice@example.org", "/mnt/alice/.kubelab/runs")
    return builders.Target(
        run_id=run_id,
        run_dir=f"/mnt/alice/.kubelab/runs/{run_id}",
        name=names.job_name(spec.display_name, run_id, owner),
        user="alice@example.org",
        namespace="alice",
        sweep="sw1",
        trial=3,
    )


def as_validatable(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Kubeflow kinds are not in the official schemas: check their pod templates instead."""
    if obj["apiVersion"] != "kubeflow.org/v1":
        return [obj]
    key = next(k for k in obj["spec"] if k.endswith("ReplicaSpecs"))
    return [
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"t-{role}".lower()},
            "template": replica["template"],
        }
        for role, replica in obj["spec"][key].items()
    ]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_manifest_passes_the_official_schema(shape: str) -> None:
    spec = spec_of(shape)
    objects = builders.build(spec, target(spec), NB)
    assert objects
    for obj in objects:
        for doc in as_validatable(obj):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        name = obj["metadata"]["name"]
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 52
        for value in obj["metadata"]["labels"].values():
            assert len(value) <= 63


def test_single_replica_job_layout() -> None:
    spec = spec_of("single")
    (job,) = builders.build(spec, target(spec), NB)
    assert job["kind"] == "Job" and "completionMode" not in job["spec"]
    assert job["spec"]["backoffLimit"] == 2 and job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    pod = job["spec"]["template"]["spec"]
    ctr = pod["containers"][0]
    assert ctr["image"] == NB.image and ctr["workingDir"] == "/mnt/alice/project"
    assert ctr["command"] == ["/bin/sh", "-c", "python train.py --lr 0.1"]
    assert ctr["resources"]["limits"] == {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "2"}
    assert ctr["resources"]["requests"] == ctr["resources"]["limits"]
    assert ctr["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["nodeSelector"] == {"lab/project": "vision", "gpu-type": "A100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in ctr["volumeMounts"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4G"}} in pod["volumes"]
    assert ctr["volumeMounts"][0] == NB.mounts[0]
    env = {e["name"]: e.get("value") for e in ctr["env"]}
    assert env["KUBELAB_RUN_ID"] == "0123456789ab"
    assert env["KUBELAB_RUN_DIR"] == "/mnt/alice/.kubelab/runs/0123456789ab"
    assert json.loads(env["KUBELAB_PARAMS"]) == {"lr": 0.1}
    assert env["KUBELAB_TENSORBOARD_DIR"].endswith("/tensorboard")
    assert env["KUBELAB_SWEEP_ID"] == "sw1" and env["KUBELAB_TRIAL"] == "3"
    assert env["SEED"] == "1" and "RANK" not in env
    labels = job["metadata"]["labels"]
    assert labels[names.MANAGED_BY] == "kubelab" and labels[names.EXPERIMENT] == "0123456789ab"
    assert labels[names.USER] == names.label_value("alice@example.org") != "alice@example.org"
    assert json.loads(job["metadata"]["annotations"][names.SPEC_ANNOTATION])["retries"] == 2


def test_parameters_are_data_not_shell_code() -> None:
    spec = ExperimentSpec.parse(
        {"command": "python t.py --name {{ name }}", "params": {"name": "x; rm -rf ~"}}
    )
    (job,) = builders.build(spec, target(spec), NB)
    assert (
        job["spec"]["template"]["spec"]["containers"][0]["command"][2] == "python t.py --name 'x; rm -rf ~'"
    )


def expand(env: list[dict[str, Any]], rank: int) -> dict[str, str]:
    """What the kubelet gives pod `rank`: the downward API index, then `$(VAR)` expansion."""
    values: dict[str, str] = {}
    for entry in env:
        if "valueFrom" in entry:
            values[entry["name"]] = str(rank)
        else:
            values[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], entry["value"])
    return values


@pytest.mark.parametrize("shape", ["pytorch-4", "tensorflow-ps", "paddle-3"])
def test_distributed_env_equals_the_shared_contract_for_every_rank(shape: str) -> None:
    spec = spec_of(shape)
    t = target(spec)
    objects = builders.build(spec, t, NB)
    service, job = objects[0], objects[1]
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == spec.replicas
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    env = pod["containers"][0]["env"]
    rank_ref = next(e for e in env if e["name"] == "RANK")
    assert (
        rank_ref["valueFrom"]["fieldRef"]["fieldPath"]
        == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    names_in_order = [e["name"] for e in env]
    assert names_in_order.index("RANK") < min(
        i for i, e in enumerate(env) if "$(RANK)" in (e.get("value") or "")
    )
    topo = topology(spec, t.name, t.service, t.ps_job)
    for rank in range(spec.replicas):
        expanded = expand(env, rank)
        for key, value in replica_env(topo, rank).items():
            assert expanded[key] == value, (key, rank)
    if spec.framework == "pytorch":
        expanded = expand(env, 2)
        assert expanded["MASTER_ADDR"] == f"{t.name}-0.{t.service}"
        assert expanded["PET_NODE_RANK"] == "2" and expanded["PET_NNODES"] == "4"
        assert expanded["PET_MASTER_ADDR"] == expanded["MASTER_ADDR"]
        assert expanded["PET_NPROC_PER_NODE"] == "2"
    if spec.framework == "tensorflow":
        ps_job = objects[2]
        assert ps_job["metadata"]["name"] == t.ps_job
        ps_pod = ps_job["spec"]["template"]["spec"]
        assert ps_pod["subdomain"] == t.service
        assert "nvidia.com/gpu" not in ps_pod["containers"][0]["resources"].get("limits", {})
        ps_env = {e["name"]: e.get("value") for e in ps_pod["containers"][0]["env"]}
        config = json.loads(ps_env["TF_CONFIG"].replace("$(KUBELAB_PS_INDEX)", "1"))
        assert config["task"] == {"type": "ps", "index": 1}
        assert config["cluster"]["ps"] == list(topo.parameter_servers)


def test_queue_suspends_and_labels_the_job() -> None:
    spec = spec_of("queued")
    job = builders.build(spec, target(spec), NB)[1]
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][names.QUEUE_LABEL] == "team-a"


def test_kubeflow_layouts() -> None:
    spec = spec_of("kubeflow-pytorch")
    (job,) = builders.build(spec, target(spec), NB)
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert job["kind"] == "PyTorchJob" and set(replicas) == {"Master", "Worker"}
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    assert replicas["Master"]["template"]["spec"]["containers"][0]["name"] == "pytorch"
    assert job["spec"]["runPolicy"]["suspend"] is True
    spec = spec_of("kubeflow-tensorflow")
    (tf,) = builders.build(spec, target(spec), NB)
    assert tf["kind"] == "TFJob"
    assert {k: v["replicas"] for k, v in tf["spec"]["tfReplicaSpecs"].items()} == {"Worker": 2, "PS": 1}


def test_an_elastic_run_is_a_pytorchjob_with_an_elastic_policy() -> None:
    spec = spec_of("kubeflow-elastic")
    (job,) = builders.build(spec, target(spec), NB)
    assert job["kind"] == "PyTorchJob"
    assert job["spec"]["elasticPolicy"] == {
        "rdzvBackend": "c10d",
        "minReplicas": 2,
        "maxReplicas": 4,
        "maxRestarts": 3,
        "nProcPerNode": 1,
    }
    (worker,) = job["spec"]["pytorchReplicaSpecs"].values()  # no Master: every c10d Worker is alike
    assert set(job["spec"]["pytorchReplicaSpecs"]) == {"Worker"} and worker["replicas"] == 4
    container = worker["template"]["spec"]["containers"][0]
    assert container["command"][:4] == ["python", "-m", "torch.distributed.run", "--no-python"]
    assert container["command"][4:] == spec.rendered_command()  # the training command, as its worker
    assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR"} & {e["name"] for e in container["env"]}  # torchrun's


def test_an_elastic_run_in_a_kueue_queue_is_refused_on_the_job_engine() -> None:
    spec = ExperimentSpec.parse(
        {**BASE, "framework": "pytorch", "replicas": {"min": 1, "max": 2}, "queue": "team"}
    )
    with pytest.raises(ValidationError) as err:
        builders.build(spec, target(spec), NB)
    assert [(f.path, "engine: kubeflow" in f.reason) for f in err.value.fields] == [("queue", True)]


def test_what_the_cluster_cannot_run_is_refused_by_field() -> None:
    spec = ExperimentSpec.parse(
        {"command": ["x"], "engine": "kubeflow", "framework": "paddle", "replicas": 2}
    )
    with pytest.raises(ValidationError) as err:
        builders.build(spec, target(spec), NotebookEnv(namespace="a"))
    paths = {f.path for f in err.value.fields}
    assert paths == {"image", "engine"}


def test_a_share_of_a_gpu_is_refused_on_kubernetes_naming_what_to_ask_for() -> None:
    spec = ExperimentSpec.parse({"command": ["x"], "image": "python:3.11", "resources": {"gpus": 0.5}})
    with pytest.raises(ValidationError) as err:
        builders.build(spec, target(spec), NB)
    [problem] = err.value.fields
    assert problem.path == "resources.gpus" and "needs a time-sliced GPU type" in problem.reason


def test_names_are_short_valid_and_distinct() -> None:
    long_name = "My Very_Long experiment name with ÜNICODE and 123 digits" * 3
    a = names.job_name(long_name, "0123456789ab", names.owner_hash("alice", "/h"))
    b = names.job_name(long_name, "0123456789ab", names.owner_hash("bob", "/h"))
    c = names.job_name(long_name, "0123456789ac", names.owner_hash("alice", "/h"))
    assert len({a, b, c}) == 3
    for name in (a, b, c, names.job_name("123", "0123456789ab", "ffff")):
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name)
        assert len(f"{names.ps_job_name(name)}-1023") <= 63
    assert names.label_value("alice") == "alice"
    assert names.label_value("a@b.org") != names.label_value("a#b.org")
    assert len(names.label_value("x" * 100)) <= 63


# -- init steps: an init container on the workspace ---------------------------------------------

INIT = [
    {"git": {"url": "https://git.example.org/alice/private.git", "revision": "v1"}},
    {"file": {"filename": "a.txt", "content": "x"}},
]


def test_init_steps_are_an_init_container_on_the_workspace() -> None:
    spec = ExperimentSpec.parse({**BASE, "image": "pytorch/pytorch:2", "init": INIT})
    (job,) = builders.build(spec, target(spec), NB)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod = job["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    main = pod["containers"][0]
    assert init["name"] == INIT_CONTAINER and init["image"] == NB.image  # kubelab is in the notebook's
    assert init["command"] == ["python", "-m", "kubelab.environments.init_run", target(spec).run_dir]
    assert init["securityContext"] == main["securityContext"] and init["volumeMounts"] == NB.mounts
    assert init["resources"]["limits"] == {"cpu": "4", "memory": "16Gi"}  # no GPU held by a clone
    # the repository's address and any credential stay in the run directory, not the pod
    assert "git.example.org" not in json.dumps(init)
    assert init["env"] == [{"name": "PYTHONUNBUFFERED", "value": "1"}]
    assert (
        "initContainers"
        not in builders.build(spec_of("single"), target(spec), NB)[0]["spec"]["template"]["spec"]
    )


@pytest.mark.parametrize(
    ("changes", "nb", "reason"),
    [
        ({"framework": "pytorch", "replicas": 2}, NB, "one-replica Job"),
        ({"engine": "kubeflow", "framework": "pytorch"}, NB, "one-replica Job"),
        ({"image": "pytorch/pytorch:2"}, NotebookEnv(namespace="alice", mounts=NB.mounts), "KUBELAB_IMAGE"),
        ({}, NotebookEnv(namespace="alice", image=NB.image), "workspace volume"),
    ],
)
def test_init_steps_the_cluster_cannot_run_are_refused_by_field(
    changes: dict[str, Any], nb: NotebookEnv, reason: str
) -> None:
    spec = ExperimentSpec.parse({**BASE, **changes, "init": INIT})
    with pytest.raises(ValidationError) as refused:
        builders.build(spec, target(spec), nb)
    (problem,) = [f for f in refused.value.fields if f.path == "init"]
    assert reason in problem.reason


def init_pod(phase: str, init_state: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p-0", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": builders.CONTAINER, "image": "nb:1"}]},
        "status": {
            "phase": phase,
            "initContainerStatuses": [{"name": INIT_CONTAINER, "state": init_state}],
            "containerStatuses": [
                {"name": builders.CONTAINER, "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        },
    }


def test_a_failing_init_step_fails_the_run_with_its_line() -> None:
    message = "init[0].git: fatal: repository 'https://git.example.org/alice/private.git/' not found"
    pod = init_pod("Failed", {"terminated": {"exitCode": 1, "reason": "Error", "message": message + "\n"}})
    job = {
        "kind": "Job",
        "spec": {"backoffLimit": 0},
        "status": {
            "failed": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}],
        },
    }
    seen = states.observe(job, [pod])
    assert (seen.state, seen.reason) == ("Failed", f"replica 0 init steps failed: {message}")
    assert seen.exit_code == 1
    running = states.observe({"kind": "Job", "spec": {}}, [init_pod("Pending", {"running": {}})])
    assert (running.state, running.reason) == ("Pending", "doing its init steps")
    silent = states.describe_pod(init_pod("Failed", {"terminated": {"exitCode": 2, "reason": "Error"}}))
    assert silent.reason == "init steps failed: exited with code 2"
