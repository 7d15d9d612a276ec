"""`engine: argo` is refused by name, with the reason API discovery gives on the cluster at
hand (tests/controlplane): no Workflows served; on one machine, no Argo. Once Workflows are
served (a Workflow CRD written from Argo's documented API group and kind, controlplane/crds.py), a token whose
Role does not allow them is refused naming the object, and nothing is left behind
(test_pipeline_argo_cluster.py runs one with the notebook's Role)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from controlplane.cluster import ControlPlane
from controlplane.crds import WORKFLOW_CRD
from kubelab_testing import manifest
from kubernetes import client, config

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.pipelines.service import Pipelines

SPEC = {
    "name": "flow",
    "engine": "argo",
    "steps": [{"name": "a", "experiment": {"command": ["python", "-c", "1"]}}],
}


def refusal(pipelines: Pipelines) -> str:
    with pytest.raises(ValidationError) as refused:
        pipelines.create(SPEC)
    assert [f.path for f in refused.value.fields] == ["engine"]
    assert pipelines.list() == []  # nothing created
    return refused.value.fields[0].reason


def test_on_one_machine_argo_is_refused(pipelines: Pipelines) -> None:
    assert "needs the Kubernetes backend" in refusal(pipelines)


@pytest.mark.cluster
def test_argo_is_refused_by_what_discovery_finds(
    simulated_cluster: ControlPlane, kubeconfig: Path, pipeline_env: Path, tmp_path: Path
) -> None:
    namespace = "argo-" + str(int(time.time() * 1000))[-8:]
    with config.new_client_from_config(str(kubeconfig)) as admin:
        client.CoreV1Api(admin).create_namespace(manifest({"metadata": {"name": namespace}}))
        client.CoreV1Api(admin).create_namespaced_service_account(
            namespace, manifest({"metadata": {"name": "notebook"}})
        )
    try:
        token = simulated_cluster.token_for(namespace, "notebook")  # discovery needs no Role
        notebook = simulated_cluster.write_kubeconfig(tmp_path / "nb", token=token, namespace=namespace)
        nb = NotebookEnv(
            namespace=namespace, user="alice", image="lab/notebook:1", home=str(pipeline_env.parent / "home")
        )
        backend = KubernetesBackend.from_kubeconfig(notebook, nb)
        pipelines = Pipelines(Experiments(backend=backend))
        assert "does not serve argoproj.io/v1alpha1 Workflows" in refusal(pipelines)
        simulated_cluster.install_crd(WORKFLOW_CRD)
        try:
            deadline = time.monotonic() + 30
            while "does not serve" in (reason := refusal(pipelines)):
                assert time.monotonic() < deadline, reason
                time.sleep(0.5)
            assert "argo: cannot create ServiceAccount/kubelab-pipelines" in reason
            assert "hub_config/rbac/notebook-role.yaml" in reason
        finally:
            simulated_cluster.remove_crd("workflows.argoproj.io")
    finally:
        with config.new_client_from_config(str(kubeconfig)) as admin:
            client.CoreV1Api(admin).delete_namespace(namespace)
