"""The elastic Indexed Job, pure: its manifest, how its status reads, and the policy that sizes
it (free GPUs by quota and node, the run's min/max, who waits)."""

from __future__ import annotations

import json
from typing import Any

from kubelab.backends.kubernetes import builders, names, states
from kubelab.backends.kubernetes.elastic_resizer import size_patch
from kubelab.backends.kubernetes.elastic_sizing import (
    ElasticRun,
    Resize,
    Room,
    Waiter,
    elastic_run,
    node_room,
    plan,
    quota_room,
    start_size,
    waiter,
)
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.priorities import HIGH_PRIORITY, LOW_PRIORITY
from kubelab.records import RUNNING
from kubelab.spec import ExperimentSpec

GPU = "nvidia.com/gpu"
NB = NotebookEnv(namespace="alice", image="lab/notebook:1", user="alice", priority_classes=True)
SPEC = {
    "command": ["python", "train.py"],
    "framework": "pytorch",
    "replicas": "1:3",
    "priority": "low",
    "resources": {"gpus": 1},
}


def low(size: int = 3, nodes: dict[int, str | None] | None = None, **fields: Any) -> ElasticRun:
    placed: dict[int, str | None] = dict(nodes) if nodes is not None else {i: "n1" for i in range(size)}
    return ElasticRun("elastic", 1, 3, size, 1, LOW_PRIORITY, nodes=placed, **fields)


def high(gpus: int = 1, pods: int = 1, priority: int = HIGH_PRIORITY) -> Waiter:
    return Waiter("deadline", "4f2a9c1e0b7d", gpus, pods, priority)


# -- the policy ---------------------------------------------------------------------------------


def test_a_waiting_higher_run_takes_the_replicas_it_needs_above_min() -> None:
    (resize,) = plan([low()], [high(gpus=2)], Room(quota=0))
    assert (resize.name, resize.size) == ("elastic", 1)
    assert resize.reason == "shrunk to 1 of 3 replicas for deadline (4f2a9c1e0b7d) (priority high)"


def test_a_run_at_min_or_not_lower_or_not_preemptible_is_left_alone() -> None:
    assert plan([low(size=1)], [high()], Room(quota=0)) == []  # at min: the scheduler's business
    assert plan([low()], [high(priority=LOW_PRIORITY)], Room(quota=0)) == []  # not more urgent
    assert plan([low(preemptible=False)], [high()], Room(quota=0)) == []


def test_a_shrink_that_would_not_make_room_is_not_made() -> None:
    # three replicas of one GPU above min 1 free two: a four-GPU pod would still not fit
    assert plan([low()], [high(gpus=4)], Room(quota=0)) == []


def test_on_nodes_the_replicas_that_go_must_free_the_waiters_node() -> None:
    # replicas 0 and 1 on n1, replica 2 on n2; a two-GPU pod needs a node with two free
    run = low(nodes={0: "n1", 1: "n1", 2: "n2"})
    (resize,) = plan([run], [high(gpus=2)], Room(nodes={"n1": 0, "n2": 1}))
    assert resize.size == 2  # replica 2 leaves n2 with two free
    # nothing free: replicas 2 and 1 would free one GPU on each node, room for no two-GPU pod
    assert plan([run], [high(gpus=2)], Room(nodes={"n1": 0, "n2": 0})) == []
    (resize,) = plan([low(nodes={0: "n2", 1: "n1", 2: "n1"})], [high(gpus=2)], Room(nodes={"n1": 0, "n2": 0}))
    assert resize.size == 1  # replicas 2 and 1 free n1


def test_it_grows_into_free_gpus_only_when_nobody_waits() -> None:
    (resize,) = plan([low(size=1)], [], Room(quota=5))
    assert resize == Resize("elastic", 3, "grew to 3 of 3 replicas: GPUs came free")
    (resize,) = plan([low(size=1)], [], Room(quota=1))
    assert resize.size == 2
    assert plan([low(size=1)], [high(priority=LOW_PRIORITY)], Room(quota=5)) == []  # someone waits
    assert plan([low(size=1)], [], Room()) == []  # nothing known of the free GPUs: stays
    assert plan([low(size=3)], [], Room(quota=5)) == []  # at max


def test_a_resize_under_way_is_neither_repeated_nor_undone() -> None:
    # patched down to 1, the controller has not removed replicas 1 and 2 yet: their GPUs are free
    shrinking = low(size=1, nodes={0: "n1", 1: "n1", 2: "n1"})
    assert plan([shrinking], [high(gpus=2)], Room(quota=0)) == []
    # replica 2 is being deleted (the quota still counts it): no second shrink, no growth
    deleting = low(size=2, nodes={0: "n1", 1: "n1"}, settling=True)
    assert plan([deleting], [high()], Room(quota=0)) == []
    assert plan([deleting], [], Room(quota=1)) == []
    # grown to 3, replica 2 not made yet: its GPU is spoken for
    assert plan([low(size=3, nodes={0: "n1", 1: "n1"})], [], Room(quota=1)) == []


def test_a_new_run_starts_at_what_fits_between_min_and_max() -> None:
    assert start_size(1, 3, 1, Room(quota=2)) == 2
    assert start_size(2, 3, 1, Room(quota=0)) == 2  # min: its pods wait like any run's
    assert start_size(1, 3, 2, Room(nodes={"a": 3, "b": 2})) == 2
    assert start_size(1, 3, 1, Room()) == 3  # unknown: max
    assert start_size(1, 3, 0, Room(quota=0)) == 3  # no GPUs


# -- reading the API's objects --------------------------------------------------------------------


def elastic_job(size: int = 2) -> dict[str, Any]:
    spec = ExperimentSpec.parse(SPEC)
    target = builders.Target("0123456789ab", "/runs/0123456789ab", "elastic-0123", "alice", replicas=size)
    job = next(o for o in builders.build(spec, target, NB) if o["kind"] == "Job")
    return dict(job, kind="Job")


def pod(job: str, index: int, node: str | None = "n1", phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{job}-{index}-x",
            "labels": {"job-name": job},
            "annotations": {names.INDEX_ANNOTATION: str(index)},
            **meta,
        },
        "spec": {"nodeName": node, "containers": [{"resources": {"limits": {GPU: "1"}}}]},
        "status": {"phase": phase},
    }


def test_an_elastic_job_is_read_as_the_policy_sees_it() -> None:
    job = elastic_job()
    pods = [pod("elastic-0123", 0), pod("elastic-0123", 1, deletionTimestamp="2026-01-01T00:00:00Z")]
    run = elastic_run(job, pods + [pod("other", 0)], GPU)
    assert run is not None
    assert (run.low, run.high, run.size, run.per, run.priority, run.preemptible) == (1, 3, 2, 1, 100, True)
    assert run.nodes == {0: "n1"} and run.settling and run.busy
    assert waiter(job, pods, GPU) is None  # an elastic run is not a waiter
    done = dict(job, status={"conditions": [{"type": "Complete", "status": "True"}]})
    assert elastic_run(done, pods, GPU) is None


def test_a_job_with_gpu_pods_not_on_a_node_waits() -> None:
    spec = ExperimentSpec.parse({**SPEC, "replicas": 1, "priority": "high"})
    target = builders.Target("ba9876543210", "/runs/ba9876543210", "deadline-ba98", "alice")
    (job,) = builders.build(spec, target, NB)
    assert waiter(job, [], GPU) == Waiter("deadline-ba98", "ba9876543210", 1, 1, HIGH_PRIORITY)
    assert waiter(job, [pod("deadline-ba98", 0, node=None, phase="Pending")], GPU) is not None
    assert waiter(job, [pod("deadline-ba98", 0)], GPU) is None
    cpu = ExperimentSpec.parse({**SPEC, "replicas": 1, "priority": "normal", "resources": {"cpu": "1"}})
    assert waiter(builders.build(cpu, target, NB)[0], [], GPU) is None


def test_the_quota_room_counts_pods_the_quota_controller_has_not_yet() -> None:
    quota = {"spec": {"hard": {f"requests.{GPU}": "4"}}, "status": {"hard": {f"requests.{GPU}": "4"}}}
    quota["status"]["used"] = {f"requests.{GPU}": "1"}
    assert quota_room([quota], GPU) == 3
    assert quota_room([quota], GPU, [pod("a", 0), pod("a", 1)]) == 2
    assert quota_room([quota], GPU, [pod("a", 0, phase="Succeeded")]) == 3
    assert quota_room([{"spec": {"hard": {"pods": "10"}}}], GPU) is None


def test_free_gpus_per_node_are_allocatable_less_unfinished_pods_on_the_groups_nodes() -> None:
    def node(name: str, gpus: str, **spec: Any) -> dict[str, Any]:
        labels = {"lab/project": "vision"} if name != "elsewhere" else {}
        return {
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"allocatable": {GPU: gpus}},
        }

    nodes = [node("n1", "4"), node("n2", "2", unschedulable=True), node("elsewhere", "8")]
    pods = [pod("a", 0), pod("a", 1, phase="Succeeded"), pod("b", 0, node="n1")]
    assert node_room(nodes, pods, GPU, {"lab/project": "vision"}) == {"n1": 2}


# -- the manifest and its status ---------------------------------------------------------------


def test_the_elastic_job_is_an_indexed_job_with_torchruns_rendezvous_at_index_0() -> None:
    spec = ExperimentSpec.parse(SPEC)
    target = builders.Target("0123456789ab", "/runs/0123456789ab", "elastic-0123", "alice", replicas=9)
    service, job = builders.build(spec, target, NB)
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    body = job["spec"]
    assert (body["completionMode"], body["parallelism"], body["completions"]) == ("Indexed", 3, 3)  # max
    assert job["metadata"]["annotations"][names.ELASTIC_ANNOTATION] == "1:3"
    pod_spec = body["template"]["spec"]
    assert pod_spec["subdomain"] == "elastic-0123"
    container = pod_spec["containers"][0]
    assert container["command"] == [
        "python",
        "-m",
        "torch.distributed.run",
        "--no-python",
        "python",
        "train.py",
    ]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PET_NNODES"] == "1:3" and env["PET_RDZV_ENDPOINT"] == "elastic-0123-0.elastic-0123:23456"
    assert env["PET_RDZV_ID"] == "0123456789ab" and env["PET_MAX_RESTARTS"] == "11"  # 3 + 8 for shrinks
    assert not {"RANK", "WORLD_SIZE", "MASTER_ADDR", "PET_NODE_RANK"} & set(env)  # torchrun's to set
    assert size_patch(2, "why") == {
        "metadata": {"annotations": {names.RESIZED_ANNOTATION: "why"}},
        "spec": {"parallelism": 2, "completions": 2},
    }
    json.dumps(job)  # plain data


def test_an_elastic_jobs_status_reads_its_size_and_why() -> None:
    job = elastic_job(size=1)
    running = [pod("elastic-0123", 0), pod("elastic-0123", 1, phase="Failed")]  # 1: removed by the shrink
    seen = states.observe(job, running)
    assert (seen.state, seen.reason, seen.size) == (RUNNING, "running 1 of 3 replicas", 1)
    job["metadata"]["annotations"][names.RESIZED_ANNOTATION] = "shrunk to 1 of 3 replicas for deadline"
    grown = dict(job, spec=dict(job["spec"], parallelism=2, completions=2))
    seen = states.observe(grown, [pod("elastic-0123", 0), pod("elastic-0123", 1, node=None, phase="Pending")])
    assert (seen.state, seen.size) == (RUNNING, 2)  # a new replica still pending: the run goes on
    assert seen.reason == "shrunk to 1 of 3 replicas for deadline"
