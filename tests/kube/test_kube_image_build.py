"""An environment's image built in the cluster, on the real control plane: the notebook's account
creates the builder Job in the admin's build namespace (the API server accepts it, and refuses
any other Job there), the run waits in Building with the builder's log, then runs in the built
image; a registry refusing the push fails the run with BuildKit's reason; a tag already in the
registry (a real one, on loopback) builds nothing. KWOK runs no container: the builder's log and
end are fed to its simulated kubelet, as the other kube tests feed a trial's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.objects import create_renamed, delete_namespaces
from kube_support import objects, pods_of, wait_for
from kubernetes import client, config
from local_registry import local_registry, put_image

from kubelab.backends.kubernetes import build_namespace, image_build
from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.image_build import BuildSettings, ImageRecipe
from kubelab.backends.kubernetes.image_registry import Registry
from kubelab.backends.kubernetes.image_stage import recipe
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.spec import ExperimentSpec

SECRET = "lab-registry"
SPEC = {"command": ["python", "train.py"], "environment": {"packages": ["numpy==2.1"]}}


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    folder = tmp_path / "registry"
    folder.mkdir()
    with local_registry(folder) as host:
        yield host


@pytest.fixture
def settings(
    cluster: Any, admin: client.ApiClient, namespace: str, registry: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[BuildSettings]:
    """The build namespace, its policy and Role, this user's binding and the registry Secret, as
    the admin applies them; the notebook's variables naming them."""
    base = BuildSettings(registry=f"{registry}/lab/envs", namespace="kubelab-builds", secret=SECRET)
    made = [*build_namespace.admin_objects(base), build_namespace.role_binding(base, namespace, "notebook")]
    _, renamed = create_renamed(cluster.kubeconfig, made, ["kubelab-builds"])
    chosen = dataclasses.replace(base, namespace=renamed["kubelab-builds"])
    core: Any = client.CoreV1Api(admin)  # the client's stubs take its models; it sends plain dicts too
    core.create_namespaced_secret(
        chosen.namespace,
        {
            "metadata": {"name": SECRET},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": '{"auths": {}}'},
        },
    )
    for name, value in {
        "KUBELAB_REGISTRY": chosen.registry,
        "KUBELAB_BUILD_NAMESPACE": chosen.namespace,
        "KUBELAB_REGISTRY_SECRET": SECRET,
    }.items():
        monkeypatch.setenv(name, value)
    try:
        wait_for_policy(admin, chosen)
        yield chosen
    finally:
        delete_namespaces(cluster.kubeconfig, chosen.namespace)
        admission = client.AdmissionregistrationV1Api(admin)
        admission.delete_validating_admission_policy_binding(renamed["kubelab-builds"])
        admission.delete_validating_admission_policy(renamed["kubelab-builds"])


def foreign_job(settings: BuildSettings, **changes: Any) -> dict[str, Any]:
    """The builder Job with `changes` to its container (or, under `pod`, to its pod)."""
    job = image_build.build_job(ImageRecipe("busybox", ("true",)), settings, "mallory")
    job["metadata"]["name"] = "not-a-build"
    pod = job["spec"]["template"]["spec"]
    pod.update(changes.pop("pod", {}))
    pod["containers"][0].update(changes)
    return job


def wait_for_policy(admin: client.ApiClient, settings: BuildSettings) -> None:
    """A new policy applies within a moment: until then a foreign image is let through."""
    batch: Any = client.BatchV1Api(admin)

    def refused() -> bool:
        try:
            batch.create_namespaced_job(
                settings.namespace, foreign_job(settings, image="busybox"), dry_run="All"
            )
        except client.ApiException as answer:
            return "ValidatingAdmissionPolicy" in str(answer.body)
        return False

    wait_for(refused, what="the build namespace's policy")


@pytest.fixture
def lab(home: Path, settings: BuildSettings, make_backend: Callable[..., KubernetesBackend]) -> Experiments:
    backend = make_backend()
    backend.images.registry = Registry(scheme="http")  # the loopback registry speaks plain HTTP
    return Experiments(home=home, backend=backend, user="alice")


def builder_pod(admin: client.ApiClient, settings: BuildSettings) -> str:
    pods = wait_for(lambda: objects(admin, "pods", settings.namespace), what="the builder's pod")
    return str(pods[0]["metadata"]["name"])


def pod_names(admin: client.ApiClient, settings: BuildSettings) -> set[str]:
    return {str(p["metadata"]["name"]) for p in objects(admin, "pods", settings.namespace)}


def the_image(settings: BuildSettings, home: Path) -> str:
    made = recipe(ExperimentSpec.parse(SPEC), "registry.example.org/lab/notebook:2024.1", home)
    assert made is not None
    return made.image(settings)


def test_a_run_waits_in_building_with_the_builders_log_then_runs_in_its_image(
    simulated_cluster: Any,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    settings: BuildSettings,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    run_id = lab.submit(SPEC, base_dir=home)["id"]
    detail = lab.get(run_id)
    assert detail["status"] == "Building", detail
    pod = builder_pod(admin, settings)
    wait_for(lambda: lab.get(run_id)["status"] == "Building" and not pods_of(admin, namespace, run_id))
    simulated_cluster.append_log(settings.namespace, pod, "#5 [2/2] RUN pip install numpy==2.1", "#6 DONE")
    build_log = home / "runs" / run_id / "logs" / "build.log"
    wait_for(lambda: lab.get(run_id) and build_log.exists() and "#6 DONE" in build_log.read_text())

    simulated_cluster.end_pod(settings.namespace, pod, "Succeeded")
    wait_for(lambda: lab.get(run_id)["status"] == "Running", what="Running in the built image")
    trial = pods_of(admin, namespace, run_id)[0]
    assert trial["spec"]["containers"][0]["image"] == the_image(settings, home)


def test_a_registry_refusing_the_push_fails_the_run_with_the_reason(
    simulated_cluster: Any,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    settings: BuildSettings,
    home: Path,
) -> None:
    project_node()
    run_id = lab.submit(SPEC, base_dir=home)["id"]
    pod = builder_pod(admin, settings)
    refusal = (
        f"error: failed to solve: failed to push {the_image(settings, home)}: "
        "denied: requested access to the resource is denied"
    )
    simulated_cluster.append_log(settings.namespace, pod, "#7 pushing layers", refusal)
    wait_for(lambda: lab.get(run_id) and "#7" in (home / "runs" / run_id / "logs" / "build.log").read_text())
    simulated_cluster.end_pod(settings.namespace, pod, "Failed", exit_code=1)
    detail = wait_for(lambda: (d := lab.get(run_id))["status"] == "Failed" and d, what="Failed")
    assert detail["reason"] == f"environment: the image build failed: {refusal}"
    assert refusal in (home / "runs" / run_id / "logs" / "build.log").read_text()
    wait_for(lambda: objects(admin, "jobs", settings.namespace) == [], what="the failed build removed")
    again = lab.submit(SPEC, base_dir=home)["id"]  # the same environment: built anew, not failed at once
    assert lab.get(again)["status"] == "Building"
    wait_for(lambda: pod_names(admin, settings) - {pod}, what="a new builder's pod")


def test_an_image_already_in_the_registry_is_not_built_again(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    settings: BuildSettings,
    registry: str,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    image = the_image(settings, home)
    put_image(registry, "lab/envs", image.rpartition(":")[2])
    run_id = lab.submit(SPEC, base_dir=home)["id"]
    trial = wait_for(lambda: pods_of(admin, namespace, run_id), what="the trial's pod")[0]
    assert trial["spec"]["containers"][0]["image"] == image
    assert objects(admin, "jobs", settings.namespace) == []  # nothing was built


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"image": "busybox"}, "with kubelab's builder command"),
        ({"command": ["sh", "-c", "cat /home/user/.docker/config.json"]}, "with kubelab's builder command"),
        ({"securityContext": {"runAsUser": 0, "privileged": True}}, "unprivileged"),
        ({"pod": {"hostPID": True}}, "shares no host namespace"),
        ({"pod": {"automountServiceAccountToken": True}}, "no ServiceAccount token"),
        (
            {
                "pod": {
                    "volumes": [
                        {"name": "registry", "hostPath": {"path": "/"}},
                        {"name": "buildkit", "emptyDir": {}},
                    ]
                }
            },
            "only empty folders",
        ),
        (
            {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]},
            "no other Secret",
        ),
    ],
)
def test_the_notebook_can_create_no_other_job_in_the_build_namespace(
    cluster: Any,
    settings: BuildSettings,
    namespace: str,
    tmp_path: Path,
    changes: dict[str, Any],
    reason: str,
) -> None:
    token = cluster.token_for(namespace, "notebook")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "nb", token=token, namespace=settings.namespace)
    with config.new_client_from_config(str(kubeconfig)) as notebook:
        batch: Any = client.BatchV1Api(notebook)
        core: Any = client.CoreV1Api(notebook)
        with pytest.raises(client.ApiException) as refused:
            batch.create_namespaced_job(settings.namespace, foreign_job(settings, **changes))
        body = str(refused.value.body)
        assert "ValidatingAdmissionPolicy" in body and reason in body
        with pytest.raises(client.ApiException) as forbidden:  # and no pod of its own (RBAC)
            pod = {"metadata": {"name": "p"}, "spec": foreign_job(settings)["spec"]["template"]["spec"]}
            core.create_namespaced_pod(settings.namespace, pod)
        assert forbidden.value.status == 403
        with pytest.raises(client.ApiException) as secret:
            core.read_namespaced_secret(SECRET, settings.namespace)
        assert secret.value.status == 403
        # the builder itself is accepted
        batch.create_namespaced_job(settings.namespace, foreign_job(settings), dry_run="All")


def test_without_a_registry_an_environment_is_refused_by_name(
    make_backend: Callable[..., KubernetesBackend], home: Path
) -> None:
    backend = make_backend(start=False)
    assert not backend.makes_environments()  # no KUBELAB_REGISTRY: the service refuses, by name
    lab = Experiments(home=home, backend=backend, user="alice")
    with pytest.raises(ValidationError) as refused:
        lab.submit(SPEC, base_dir=home)
    assert [(f.path, f.reason) for f in refused.value.fields] == [
        ("environment", "the kubernetes backend does not build environments: use an image")
    ]
    assert list((home / "runs").iterdir()) == []  # nothing left behind


def test_a_run_stopped_while_building_stops_and_starts_nothing(
    simulated_cluster: Any,
    project_node: Callable[..., str],
    admin: client.ApiClient,
    lab: Experiments,
    settings: BuildSettings,
    namespace: str,
    home: Path,
) -> None:
    project_node()
    run_id = lab.submit(SPEC, base_dir=home)["id"]
    pod = builder_pod(admin, settings)
    lab.stop(run_id)
    assert lab.get(run_id)["status"] == "Stopped"
    simulated_cluster.end_pod(settings.namespace, pod, "Succeeded")  # the build goes on for others
    wait_for(
        lambda: any(
            (j.get("status") or {}).get("succeeded") for j in objects(admin, "jobs", settings.namespace)
        ),
        what="the shared build's end",
    )
    assert lab.get(run_id)["status"] == "Stopped" and objects(admin, "jobs", namespace) == []
