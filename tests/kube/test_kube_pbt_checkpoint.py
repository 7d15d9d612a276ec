"""A run started from another run's checkpoint on Kubernetes (how a PBT member goes on from its
parent's): the copy lands in the new run's checkpoint folder on the workspace claim, the folder
its pod is told as KUBELAB_CHECKPOINT_DIR, before the Job exists."""

from __future__ import annotations

from pathlib import Path

from kube_support import ONE_GPU_RUN, objects, wait_for
from kubernetes import client

from kubelab.checkpoints import step_folder
from kubelab.experiments import Experiments


def test_a_copied_checkpoint_is_in_the_folder_the_pod_is_told(
    admin: client.ApiClient, lab: Experiments, namespace: str, home: Path
) -> None:
    parent = lab.submit(ONE_GPU_RUN, base_dir=home)["id"]
    saved = step_folder(lab.run(parent).checkpoints_dir, 3)
    saved.mkdir(parents=True)
    (saved / "value").write_text("1.5")
    child = lab.submit(ONE_GPU_RUN, base_dir=home, checkpoint=saved)["id"]
    job = wait_for(
        lambda: objects(admin, "jobs", namespace, f"kubelab.io/experiment={child}"), what="the Job"
    )[0]
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    folder = Path(env["KUBELAB_CHECKPOINT_DIR"])
    assert folder == lab.run(child).checkpoints_dir  # the claim's path, as the notebook sees it
    assert (step_folder(folder, 3) / "value").read_text() == "1.5"
    assert [p.name for p in folder.iterdir()] == ["step-000000000003"]  # no partial copy left
