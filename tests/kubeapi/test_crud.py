"""CRUD, selectors, patches and deletion through the official sync client."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .conftest import pod_body


def status_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_discovery_and_version(api: client.ApiClient, kube_api) -> None:
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "rbac.authorization.k8s.io", "kubeflow.org", "kueue.x-k8s.io"} <= groups
    resources = client.CoreV1Api(api).get_api_resources().resources
    names = {r.name for r in resources}
    assert {"pods", "pods/log", "pods/status", "namespaces", "events", "nodes"} <= names
    kinds = client.CustomObjectsApi(api).get_api_resources("kubeflow.org", "v1").resources
    assert {r.kind for r in kinds} >= {"PyTorchJob", "TFJob"}
    version = client.VersionApi(api).get_code()
    assert version.git_version == f"v{kube_api.cluster.validator.schema.version}"


def test_optional_groups_absent_when_not_enabled(kube_api_plain, tmp_path) -> None:
    from .conftest import sync_client

    with sync_client(kube_api_plain, tmp_path) as api:
        groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
        assert "kubeflow.org" not in groups
        with pytest.raises(ApiException) as err:
            client.CustomObjectsApi(api).get_api_resources("kubeflow.org", "v1")
        assert err.value.status == 404


@pytest.mark.parametrize("create, read, body", [
    ("create_namespaced_config_map", "read_namespaced_config_map",
     {"metadata": {"name": "cm"}, "data": {"k": "v"}}),
    ("create_namespaced_secret", "read_namespaced_secret",
     {"metadata": {"name": "sec"}, "stringData": {"k": "v"}}),
    ("create_namespaced_service_account", "read_namespaced_service_account",
     {"metadata": {"name": "sa"}}),
    ("create_namespaced_service", "read_namespaced_service",
     {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}),
    ("create_namespaced_persistent_volume_claim", "read_namespaced_persistent_volume_claim",
     {"metadata": {"name": "pvc"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                            "resources": {"requests": {"storage": "1Gi"}}}}),
    ("create_namespaced_resource_quota", "read_namespaced_resource_quota",
     {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "3"}}}),
    ("create_namespaced_event", "read_namespaced_event",
     {"metadata": {"name": "ev"}, "involvedObject": {"kind": "Pod", "name": "x"},
      "reason": "Test", "message": "hello"}),
    ("create_namespaced_pod", "read_namespaced_pod", pod_body("pod")),
])
def test_create_read_list_delete(core, ns, create, read, body) -> None:
    created = getattr(core, create)(ns, body)
    name = body["metadata"]["name"]
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert int(created.metadata.resource_version) > 0
    again = getattr(core, read)(name, ns)
    assert again.metadata.resource_version == created.metadata.resource_version
    with pytest.raises(ApiException) as err:
        getattr(core, create)(ns, body)
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"
    plural = status_of(err.value)["details"]["kind"]
    getattr(core, read.replace("read_", "delete_"))(name, ns)
    with pytest.raises(ApiException) as err:
        getattr(core, read)(name, ns)
    assert status_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'{plural} "{name}" not found', "reason": "NotFound",
        "details": {"name": name, "kind": plural}, "code": 404}


def test_server_defaults(core, ns) -> None:
    secret = core.create_namespaced_secret(ns, {"metadata": {"name": "s"},
                                                "stringData": {"token": "abc"}})
    assert secret.data == {"token": "YWJj"} and secret.type == "Opaque"
    svc = core.create_namespaced_service(ns, {"metadata": {"name": "web"},
                                              "spec": {"ports": [{"port": 80}]}})
    assert svc.spec.cluster_ip.startswith("10.96.") and svc.spec.ports[0].target_port == 80
    pod = core.create_namespaced_pod(ns, pod_body("p", limits={"cpu": "1", "memory": "1Gi"}))
    assert pod.status.phase == "Pending" and pod.status.qos_class == "Guaranteed"
    assert pod.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    assert pod.spec.service_account_name == "default"
    names = {sa.metadata.name for sa in core.list_namespaced_service_account(ns).items}
    assert names == {"default"}


def test_generate_name_and_missing_namespace(core, ns) -> None:
    body = pod_body("")
    body["metadata"] = {"generateName": "worker-"}
    pod = core.create_namespaced_pod(ns, body)
    assert pod.metadata.name.startswith("worker-") and len(pod.metadata.name) == 12
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("nope", pod_body("p"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "nope" not found'


def test_label_and_field_selectors(core, ns, kube_api) -> None:
    for name, labels in [("a", {"app": "x", "tier": "web"}), ("b", {"app": "y"}),
                         ("c", {"tier": "db"})]:
        body = pod_body(name)
        body["metadata"]["labels"] = labels
        core.create_namespaced_pod(ns, body)

    def names(**kwargs) -> set[str]:
        return {p.metadata.name for p in core.list_namespaced_pod(ns, **kwargs).items}

    assert names(label_selector="app=x") == {"a"}
    assert names(label_selector="app==y") == {"b"}
    assert names(label_selector="app!=x") == {"b", "c"}
    assert names(label_selector="app in (x,y)") == {"a", "b"}
    assert names(label_selector="app notin (x)") == {"b", "c"}
    assert names(label_selector="tier") == {"a", "c"}
    assert names(label_selector="!tier") == {"b"}
    assert names(label_selector="app,tier=web") == {"a"}
    kube_api.add_node("n1")
    kube_api.run_pod(ns, "a")
    assert names(field_selector="status.phase=Running") == {"a"}
    assert names(field_selector="status.phase!=Running") == {"b", "c"}
    assert names(field_selector="spec.nodeName=n1") == {"a"}
    assert names(field_selector="metadata.name=b") == {"b"}
    with pytest.raises(ApiException) as err:
        names(field_selector="spec.bogus=1")
    assert err.value.status == 400 and "spec.bogus" in status_of(err.value)["message"]
    events = core.list_namespaced_event(ns, field_selector="involvedObject.name=a,"
                                                           "involvedObject.kind=Pod")
    assert {e.reason for e in events.items} >= {"Scheduled", "Started"}


def test_list_pagination_and_resource_version(core, ns) -> None:
    for i in range(5):
        core.create_namespaced_config_map(ns, {"metadata": {"name": f"cm{i}"}})
    first = core.list_namespaced_config_map(ns, limit=2)
    assert len(first.items) == 2 and first.metadata._continue
    rest = core.list_namespaced_config_map(ns, limit=10, _continue=first.metadata._continue)
    got = [c.metadata.name for c in first.items + rest.items]
    assert got == sorted(["cm0", "cm1", "cm2", "cm3", "cm4", "kube-root-ca.crt"])
    assert int(first.metadata.resource_version) >= max(
        int(c.metadata.resource_version) for c in first.items)


def test_replace_conflict_and_patches(core, ns) -> None:
    cm = core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    cm.data["b"] = "2"
    updated = core.replace_namespaced_config_map("cm", ns, cm)
    assert updated.data == {"a": "1", "b": "2"}
    cm.data["c"] = "3"  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cm", ns, cm)
    assert err.value.status == 409 and status_of(err.value)["reason"] == "Conflict"
    assert "the object has been modified" in status_of(err.value)["message"]
    # strategic merge (the client's default for dicts): containers merge by name
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}})
    pod = core.patch_namespaced_pod("p", ns, {"spec": {"containers": [
        {"name": "b", "image": "y:2"}]}})
    assert [(c.name, c.image) for c in pod.spec.containers] == [("a", "x:1"), ("b", "y:2")]
    patched = core.patch_namespaced_config_map("cm", ns, [
        {"op": "add", "path": "/data/z", "value": "26"},
        {"op": "remove", "path": "/data/a"}])
    assert patched.data == {"b": "2", "z": "26"}
    merged = core.patch_namespaced_config_map(
        "cm", ns, {"data": {"b": None}}, _content_type="application/merge-patch+json")
    assert merged.data == {"z": "26"}
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_config_map("cm", ns, [{"op": "replace", "path": "/data/q",
                                                     "value": "1"}])
    assert err.value.status == 422
    with pytest.raises(ApiException) as err:
        core.patch_namespaced_pod("p", ns, {"spec": {"restartPolicy": "Never"}})
    assert err.value.status == 422 and "pod updates may not change" in status_of(
        err.value)["message"]


def test_status_subresource_is_separate(core, ns) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    pod = core.patch_namespaced_pod("p", ns, {"status": {"phase": "Running"},
                                              "metadata": {"labels": {"l": "1"}}})
    assert pod.status.phase == "Pending" and pod.metadata.labels == {"l": "1"}
    pod = core.patch_namespaced_pod_status("p", ns, {"status": {"phase": "Running"}})
    assert pod.status.phase == "Running"


def test_namespace_deletion_removes_contents(core, ns) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    deleted = core.delete_namespace(ns)
    assert deleted["status"]["phase"] == "Terminating"
    assert core.list_namespaced_pod(ns).items == []
    with pytest.raises(ApiException) as err:
        core.read_namespace(ns)
    assert err.value.status == 404


def test_delete_collection_and_preconditions(core, ns) -> None:
    for name in ("a", "b"):
        body = pod_body(name)
        body["metadata"]["labels"] = {"group": "g"}
        core.create_namespaced_pod(ns, body)
    core.create_namespaced_pod(ns, pod_body("keep"))
    core.delete_collection_namespaced_pod(ns, label_selector="group=g")
    assert [p.metadata.name for p in core.list_namespaced_pod(ns).items] == ["keep"]
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("keep", ns, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="not-the-uid")))
    assert err.value.status == 409 and "Precondition failed" in status_of(err.value)["message"]


def test_custom_resources(api, ns) -> None:
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "pytorch", "image": "torch:2"}]}}}}}}
    created = custom.create_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs",
                                                     body)
    assert created["metadata"]["uid"]
    listed = custom.list_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["pt"]
    assert listed["items"][0]["kind"] == "PyTorchJob"  # custom resources keep kind in lists
    patched = custom.patch_namespaced_custom_object(
        "kubeflow.org", "v1", ns, "pytorchjobs", "pt", {"metadata": {"labels": {"x": "1"}}})
    assert patched["metadata"]["labels"] == {"x": "1"}
    custom.delete_namespaced_custom_object("kubeflow.org", "v1", ns, "pytorchjobs", "pt")
    assert custom.list_namespaced_custom_object("kubeflow.org", "v1", ns,
                                                "pytorchjobs")["items"] == []
