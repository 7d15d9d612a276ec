"""The spawner's variables: read exactly, malformed ones refused naming the variable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.notebook_env import NotebookEnv
from kubelab.errors import ValidationError

VOLUMES = {
    "volumes": [{"name": "ws", "persistentVolumeClaim": {"claimName": "home-a"}}],
    "mounts": [{"name": "ws", "mountPath": "/mnt/a", "subPath": "a"}],
}


def test_reads_the_contract(tmp_path: Path) -> None:
    ns_file = tmp_path / "namespace"
    ns_file.write_text("user-a\n")
    nb = NotebookEnv.from_environ(
        {
            "KUBELAB_IMAGE": "nb:1",
            "KUBELAB_USER": "a",
            "KUBELAB_PROJECT": "vision",
            "KUBELAB_NODE_SELECTOR": '{"pool": "gpu"}',
            "KUBELAB_TOLERATIONS": '[{"key": "gpu", "operator": "Exists"}]',
            "KUBELAB_GPU_RESOURCE": "amd.com/gpu",
            "KUBELAB_GPU_TYPE_LABEL": "accelerator",
            "KUBELAB_VOLUMES": json.dumps(VOLUMES),
            "KUBELAB_SHM": "4G",
            "KUBELAB_HOME": "/mnt/a/.kubelab",
            "KUBELAB_SERVICE_ACCOUNT": "trainer",
        },
        ns_file,
    )
    assert nb.namespace == "user-a" and nb.image == "nb:1" and nb.project == "vision"
    assert nb.node_selector == {"pool": "gpu"} and nb.tolerations[0]["key"] == "gpu"
    assert nb.gpu_resource == "amd.com/gpu" and nb.gpu_type_label == "accelerator"
    assert nb.volumes == VOLUMES["volumes"] and nb.mounts == VOLUMES["mounts"]
    assert (nb.shm, nb.home, nb.service_account) == ("4G", "/mnt/a/.kubelab", "trainer")


def test_defaults(tmp_path: Path) -> None:
    nb = NotebookEnv.from_environ({"KUBELAB_NAMESPACE": "x"}, tmp_path / "absent")
    assert (nb.gpu_resource, nb.gpu_type_label, nb.image) == ("nvidia.com/gpu", "gpu-type", None)


@pytest.mark.parametrize(
    "name, value, reason",
    [
        ("KUBELAB_NODE_SELECTOR", "{pool: gpu}", "is not valid JSON"),
        ("KUBELAB_NODE_SELECTOR", '["a"]', "must be a JSON object"),
        ("KUBELAB_NODE_SELECTOR", '{"a": 1}', "values must be strings"),
        ("KUBELAB_TOLERATIONS", '{"key": "x"}', "must be a JSON list"),
        ("KUBELAB_TOLERATIONS", '["x"]', "must be a list of objects"),
        ("KUBELAB_VOLUMES", '{"vols": []}', "unknown keys ['vols']"),
        ("KUBELAB_VOLUMES", '{"volumes": {"a": 1}}', "must be lists"),
        ("KUBELAB_VOLUMES", '{"mounts": [{"name": "ws", "mountPath": "/w"}]}', "names no volume"),
        ("KUBELAB_SHM", "lots", ""),
    ],
)
def test_malformed_values_are_refused(tmp_path: Path, name: str, value: str, reason: str) -> None:
    with pytest.raises(ValidationError) as err:
        NotebookEnv.from_environ({name: value}, tmp_path / "absent")
    assert err.value.fields[0].path == name
    assert reason in err.value.fields[0].reason


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as err:
        KubernetesBackend.from_kubeconfig(tmp_path / "nope", NotebookEnv(namespace="a"))
    assert err.value.fields[0].path == "KUBECONFIG"


def test_render_only_backend_cannot_submit() -> None:
    backend = KubernetesBackend(None, NotebookEnv(namespace="a", image="nb:1"))
    with pytest.raises(Exception, match="rendering only"):
        _ = backend.api
