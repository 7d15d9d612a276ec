# ruff: noqa: F811 - pytest fixtures imported from test_deploy_cluster are named as parameters
"""A user's claims on the real control plane (spawner/storage_layout.py): a new user gets one
claim with a workspace and an archive folder; a user whose namespace an earlier kubelab made
keeps the two claims holding their data, until an admin moves them; and a notebook's token
cannot reach past its own claim's folders.

The hub runs with the rights of hub_config/rbac/hub-clusterrole.yaml only, through the fault
proxy that counts its requests (test_spawn_scale.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubelab_testing import manifest, plain
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from test_deploy_cluster import (  # noqa: F401 - fixtures
    Lab,
    admin,
    control_plane,
    install,
    lab,
    previous_version_namespace,
)
from test_spawn_scale import bundle_writes, proxied_hub, proxy, spawn_all  # noqa: F401 - fixtures

pytestmark = pytest.mark.cluster
LAYOUT = "kubelab.io/storage"


def claims(lab: Lab, namespace: str) -> dict[str, dict[str, Any]]:
    listed = plain(k8s.CoreV1Api(lab.admin).list_namespaced_persistent_volume_claim(namespace))
    return {c["metadata"]["name"]: c for c in listed["items"]}


def pod_claims(lab: Lab, namespace: str, pod_name: str) -> dict[str, tuple[str, str | None]]:
    """mountPath -> (claim, subPath) of the notebook pod's claim mounts, as the API server has it."""
    pod = plain(k8s.CoreV1Api(lab.admin).read_namespaced_pod(pod_name, namespace))
    volumes = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    return {
        m["mountPath"]: (volumes[m["name"]], m.get("subPath"))
        for m in pod["spec"]["containers"][0]["volumeMounts"]
        if m["name"] in volumes
    }


def layout(lab: Lab, namespace: str) -> str | None:
    found: str | None = plain(k8s.CoreV1Api(lab.admin).read_namespace(namespace))["metadata"][
        "annotations"
    ].get(LAYOUT)
    return found


def spawn_seeing(lab: Lab, proxy: Any, user: str) -> dict[str, tuple[str, str | None]]:
    """One spawn of `user` (the hub's rights, through the proxy); its pod's claim mounts."""
    seen: list[dict[str, tuple[str, str | None]]] = []
    namespace = lab.user_namespace(user)

    def record(spawner: Any, url: str) -> None:
        seen.append(pod_claims(lab, namespace, spawner.pod_name))

    assert spawn_all(lab.config(), proxied_hub(lab, proxy), [user], started=record) == [namespace]
    return seen[0]


def test_a_new_user_gets_one_claim_with_a_workspace_and_an_archive_folder(lab: Lab, proxy: Any) -> None:
    install(lab, lab.control_plane.kubeconfig)
    namespace = lab.user_namespace("nia")
    assert spawn_seeing(lab, proxy, "nia") == {
        "/mnt/nia": ("kubelab-home", "workspace"),
        "/archives/nia": ("kubelab-home", "archive"),
    }
    made = claims(lab, namespace)
    assert sorted(made) == ["kubelab-home"]
    assert made["kubelab-home"]["status"]["phase"] == "Bound"  # the spawn waited for one claim
    assert made["kubelab-home"]["spec"]["resources"]["requests"]["storage"] == "150Gi"
    assert layout(lab, namespace) == "one-claim"
    creates = [r for r in proxy.seen() if r.resource == "persistentvolumeclaims" and r.verb == "create"]
    assert len(creates) == 1


def test_a_user_of_an_earlier_version_keeps_both_claims_until_an_admin_moves_them(
    lab: Lab, proxy: Any
) -> None:
    """An earlier kubelab made carol's namespace and her two claims (holding her data, marked by
    a label): her spawn mounts them where they were, creates no third claim and records the
    layout, so her next spawn lists no claims and writes nothing. The admin's move (docs/
    jupyterhub.md: data copied, then the namespace annotated) takes her to one claim; kubelab
    deletes neither old claim."""
    install(lab, lab.control_plane.kubeconfig)
    namespace = previous_version_namespace(lab, "carol")
    before = {name: c["metadata"]["uid"] for name, c in claims(lab, namespace).items()}
    assert sorted(before) == ["kubelab-archive", "kubelab-workspace"]

    assert spawn_seeing(lab, proxy, "carol") == {
        "/mnt/carol": ("kubelab-workspace", None),
        "/archives/carol": ("kubelab-archive", None),
    }
    assert {name: c["metadata"]["uid"] for name, c in claims(lab, namespace).items()} == before
    assert layout(lab, namespace) == "two-claims"
    listed = [r.path for r in proxy.seen() if r.resource == "persistentvolumeclaims" and r.verb == "list"]
    assert f"/api/v1/namespaces/{namespace}/persistentvolumeclaims" in listed  # looked once

    proxy.forget()
    assert spawn_seeing(lab, proxy, "carol")["/mnt/carol"] == ("kubelab-workspace", None)
    seen = proxy.seen()
    assert bundle_writes(seen, namespace) == []
    assert f"/api/v1/namespaces/{namespace}/persistentvolumeclaims" not in [r.path for r in seen]

    k8s.CoreV1Api(lab.admin).patch_namespace(namespace, {"metadata": {"annotations": {LAYOUT: "one-claim"}}})
    assert spawn_seeing(lab, proxy, "carol") == {
        "/mnt/carol": ("kubelab-home", "workspace"),
        "/archives/carol": ("kubelab-home", "archive"),
    }
    after = claims(lab, namespace)
    assert sorted(after) == ["kubelab-archive", "kubelab-home", "kubelab-workspace"]
    assert {name: after[name]["metadata"]["uid"] for name in before} == before  # kept, untouched


def test_a_notebook_cannot_reach_past_its_claims_folders(lab: Lab, proxy: Any, control_plane: Any) -> None:
    """Dan's notebook token tries, in his own namespace: a Job mounting his claim with a subPath
    that climbs out of it, or an absolute one (the API server refuses each, 422, naming the
    field), and a claim of his own bound to erin's volume (refused, 403: the token may create no
    claim). A pod names a claim of its own namespace only, so erin's claim is out of reach by name."""
    install(lab, lab.control_plane.kubeconfig)
    assert spawn_all(lab.config(), proxied_hub(lab, proxy), ["dan", "erin"]) == [
        lab.user_namespace("dan"),
        lab.user_namespace("erin"),
    ]
    mine = lab.user_namespace("dan")
    token = control_plane.token_for(mine, "kubelab-notebook")
    dan = k8s_config.new_client_from_config(
        config_file=str(control_plane.write_kubeconfig(lab.dir / "dan", token=token))
    )

    def job(sub_path: str) -> Any:
        container = {
            "name": "c",
            "image": "busybox",
            "volumeMounts": [{"name": "home", "mountPath": "/data", "subPath": sub_path}],
        }
        body = {
            "metadata": {"name": "reach"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [container],
                        "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "kubelab-home"}}],
                    }
                }
            },
        }
        return k8s.BatchV1Api(dan).create_namespaced_job(mine, manifest(body), dry_run="All")

    job("workspace")  # his own folder: accepted (a dry run, so nothing is made)
    for sub_path in ("..", "../..", "workspace/../..", f"../../{lab.user_namespace('erin')}", "/var/lib"):
        with pytest.raises(ApiException) as refused:
            job(sub_path)
        assert refused.value.status == 422, sub_path
        assert "subPath" in str(refused.value.body), refused.value.body

    theirs = claims(lab, lab.user_namespace("erin"))["kubelab-home"]["spec"]["volumeName"]
    claim = {
        "metadata": {"name": "borrowed"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": theirs,
        },
    }
    with pytest.raises(ApiException) as refused:
        k8s.CoreV1Api(dan).create_namespaced_persistent_volume_claim(mine, manifest(claim))
    assert refused.value.status == 403
