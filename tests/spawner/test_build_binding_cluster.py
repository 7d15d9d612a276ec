"""A hub with a `registry` binds each user's notebook account in the build namespace: on the real
control plane, a spawn with the hub's own credentials applies the RoleBinding there (the API
server lets the hub grant the build Role: it holds every right in it), and the user's notebook
token may then create the builder Job, and nothing in another user's namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from test_deploy_cluster import Lab, admin, apply_objects, control_plane, install, lab, spawn

from kubelab.backends.kubernetes import build_namespace
from kubelab.backends.kubernetes.image_build import BuildSettings, ImageRecipe, build_job

pytestmark = pytest.mark.cluster
__all__ = ["admin", "control_plane", "lab"]  # the fixtures, shared with test_deploy_cluster


def test_a_spawn_binds_the_notebook_in_the_build_namespace(lab: Lab, control_plane: Any) -> None:
    install(lab, control_plane.kubeconfig)
    settings = BuildSettings(
        registry="registry.example.org/lab/envs", namespace=f"kb-{lab.suffix}", secret="s"
    )
    apply_objects(
        control_plane.kubeconfig, [build_namespace.namespace(settings), build_namespace.role(settings)]
    )
    try:
        config = lab.config(
            f"c.KubeLabSpawner.registry = {settings.registry!r}\n"
            f"c.KubeLabSpawner.build_namespace = {settings.namespace!r}\n"
        )
        [alice, bob] = spawn(config, lab.hub_kubeconfig(), ["alice", "bob"], {})
        rbac: Any = k8s.RbacAuthorizationV1Api(lab.admin)  # its models' fields are all Optional
        bindings = rbac.list_namespaced_role_binding(settings.namespace).items
        assert {(b.metadata.name, b.subjects[0].namespace) for b in bindings} == {
            (f"kubelab-builds-{alice}", alice),
            (f"kubelab-builds-{bob}", bob),
        }
        token = control_plane.token_for(alice, "kubelab-notebook")
        kubeconfig = control_plane.write_kubeconfig(lab.dir / "alice", token=token, namespace=alice)
        with k8s_config.new_client_from_config(str(kubeconfig)) as notebook:
            batch: Any = k8s.BatchV1Api(notebook)
            job = build_job(ImageRecipe("lab/notebook:1", ("true",)), settings, "alice")
            batch.create_namespaced_job(settings.namespace, job, dry_run="All")
            with pytest.raises(ApiException) as elsewhere:
                batch.create_namespaced_job(bob, job, dry_run="All")
            assert elsewhere.value.status == 403
    finally:
        k8s.CoreV1Api(lab.admin).delete_namespace(settings.namespace)


def test_without_a_registry_no_binding_is_made(lab: Lab, control_plane: Any, tmp_path: Path) -> None:
    install(lab, control_plane.kubeconfig)
    [alice] = spawn(lab.config(), lab.hub_kubeconfig(), ["alice"], {})
    rbac: Any = k8s.RbacAuthorizationV1Api(lab.admin)
    names = {b.metadata.name for b in rbac.list_role_binding_for_all_namespaces().items}
    assert f"kubelab-builds-{alice}" not in names
