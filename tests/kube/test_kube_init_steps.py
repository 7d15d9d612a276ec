"""A spec's `init` steps on the real control plane: the API server accepts the Job with its init
container (the notebook's image, the workspace mounts, the `restricted` fields), and an init step
that fails fails the run naming the step. KWOK runs no container, so the test plays the kubelet:
it runs the init container's command (`init_run.main`, the real implementation) over the run
directory and reports its exit and termination message in the pod's status, as a kubelet would."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from kube_support import IMAGE, objects, pods_of, wait_for
from kubernetes import client

from kubelab.backends.kubernetes.init_container import INIT_CONTAINER
from kubelab.environments import init_run
from kubelab.experiments import Experiments

SPEC = {
    "command": ["python", "train.py"],
    "resources": {"cpu": "1", "memory": "1Gi"},
    "init": [
        {"file": {"filename": "config.yaml", "content": "lr: 0.1\n"}},
        {"git": {"url": "/nowhere/repo.git"}},
    ],
}


def test_a_failing_init_container_fails_the_run_naming_the_step(
    simulated_cluster: ControlPlane,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    namespace: str,
    home: Path,
    tmp_path: Path,
) -> None:
    project_node("cpu", cpu="8")
    core: Any = client.CoreV1Api(admin)  # the client's stubs take its models; it sends plain dicts too
    core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    run_id = lab.submit(SPEC, base_dir=home)["id"]
    (job,) = objects(admin, "jobs", namespace, f"kubelab.io/experiment={run_id}")
    pod_spec = job["spec"]["template"]["spec"]
    (init,) = pod_spec["initContainers"]
    assert init["name"] == INIT_CONTAINER and init["image"] == IMAGE
    assert init["command"][-1] == str(home / "runs" / run_id)
    # the namespace enforces `restricted`: the pod passes it, and would not without these fields
    init["securityContext"] = {}
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(
            namespace, {"metadata": {"name": "probe"}, "spec": pod_spec}, dry_run="All"
        )
    assert refused.value.status == 403 and INIT_CONTAINER in str(refused.value.body)
    started = wait_for(  # by the simulated kubelet, which then leaves the pod's status to this test
        lambda: [p for p in pods_of(admin, namespace, run_id) if p["status"].get("podIP")],
        what="the pod started",
    )
    pod = started[0]["metadata"]["name"]

    # the kubelet's part: the init container's command over the run directory on the workspace
    message = tmp_path / "termination-log"
    message.touch()  # as the kubelet makes it
    assert init_run.main([init["command"][-1]], termination_log=message) == 1
    reason = message.read_text()
    assert reason.startswith("init[1].git: ") and "/nowhere/repo.git" in reason
    assert (home / "runs" / run_id / "code" / "config.yaml").read_text() == "lr: 0.1\n"  # step 0 ran
    simulated_cluster.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        {"status": failed_in_init(reason)},
        content_type="application/merge-patch+json",
    )

    def failed() -> dict[str, Any] | None:
        record = lab.get(run_id)
        return record if record["status"] == "Failed" else None

    record = wait_for(failed, timeout=60, what="the run failed by its init step")
    assert record["reason"] == f"replica 0 init steps failed: {reason}"


def failed_in_init(message: str) -> dict[str, Any]:
    """A pod's status after its init container exited 1 (restartPolicy Never)."""
    ended = {"exitCode": 1, "reason": "Error", "message": message}
    return {
        "phase": "Failed",
        "conditions": [{"type": "Initialized", "status": "False", "reason": "ContainersNotInitialized"}],
        "initContainerStatuses": [
            {
                "name": INIT_CONTAINER,
                "image": IMAGE,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": ended},
            }
        ],
        "containerStatuses": [
            {
                "name": "trainer",
                "image": IMAGE,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "PodInitializing"}},
            }
        ],
    }
