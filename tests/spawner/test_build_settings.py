"""The hub's image-build settings reach the notebook, each user namespace and the admin's objects."""

from __future__ import annotations

from pathlib import Path

from kubelab.spawner import builds
from kubelab.spawner.cli import render, render_all

REPO = Path(__file__).resolve().parents[2]


def config_with(tmp_path: Path, **settings: str) -> Path:
    lines = [f"c.KubeLabSpawner.{name} = {value!r}" for name, value in settings.items()]
    path = tmp_path / "jupyterhub_config.py"
    path.write_text((REPO / "hub_config" / "jupyterhub_config.py").read_text() + "\n".join(["", *lines, ""]))
    return path


def test_without_a_registry_nothing_is_added(tmp_path: Path) -> None:
    traits = builds.BuildTraits()
    assert builds.notebook_env(traits) == {} and builds.user_objects(traits, "u", "nb") == []
    kinds = {o["kind"] for o in render_all(config_with(tmp_path))}
    assert "Namespace" not in kinds


def test_a_registry_brings_the_build_namespace_its_binding_and_the_notebooks_variables(
    tmp_path: Path,
) -> None:
    config = config_with(tmp_path, registry="registry.lab.example.org/lab/envs", build_namespace="lab-builds")
    admin = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in render_all(config)}
    assert {("Namespace", None, "lab-builds"), ("Role", "lab-builds", "kubelab-builds")} <= admin
    assert ("ValidatingAdmissionPolicy", None, "kubelab-builds") in admin
    spawned = render("alice", [], {}, config)
    binding = next(
        o for o in spawned if o["kind"] == "RoleBinding" and o["metadata"]["namespace"] == "lab-builds"
    )
    assert (
        binding["subjects"][0]["namespace"]
        == next(o for o in spawned if o["kind"] == "Namespace")["metadata"]["name"]
    )
    pod = next(o for o in spawned if o["kind"] == "Pod")
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["KUBELAB_REGISTRY"] == "registry.lab.example.org/lab/envs"
    assert (
        env["KUBELAB_BUILD_NAMESPACE"] == "lab-builds"
        and env["KUBELAB_REGISTRY_SECRET"] == "kubelab-registry"
    )
