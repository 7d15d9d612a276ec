"""Schema and semantic validation (422), RBAC (401/403), and ResourceQuota refusals."""

from __future__ import annotations

import asyncio
import json

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from .conftest import pod_body, raw_request, sync_client


def body_of(exc: ApiException) -> dict:
    return json.loads(exc.body)


def test_schema_refusal_with_causes_via_asyncio_dicts(kube_api, tmp_path) -> None:
    """The sync client validates types itself; raw dicts through kubernetes_asyncio do not."""
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig

    path = kube_api.write_kubeconfig(tmp_path / "kc")

    async def create(body: dict) -> aclient.ApiException:
        await aconfig.load_kube_config(config_file=str(path))
        async with aclient.ApiClient() as api:
            with pytest.raises(aclient.ApiException) as err:
                await aclient.CoreV1Api(api).create_namespaced_pod("default", body)
            return err.value

    err = asyncio.run(create({"metadata": {"name": "x"}, "spec": {"containers": "x"}}))
    status = json.loads(err.body)
    assert err.status == 422 and status["reason"] == "Invalid"
    assert status["details"]["causes"] == [{"reason": "FieldValueTypeInvalid", "field":
                                            "spec.containers", "message":
                                            'Invalid value: "x": must be of type array'}]
    err = asyncio.run(create({"metadata": {"name": "x"}, "spec": {"containers": [
        {"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}}))
    assert json.loads(err.body)["details"]["causes"][0]["field"] == (
        "spec.containers[0].ports[0].containerPort")


def test_semantic_checks(core, ns) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespace({"metadata": {"name": "a" * 64}})
    assert "must be no more than 63 characters" in body_of(err.value)["message"]
    bad = pod_body("p")
    bad["metadata"]["labels"] = {"team": "a b"}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, bad)
    assert body_of(err.value)["details"]["causes"][0]["field"] == "metadata.labels"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_body("p", limits={"gpu": "1"}))
    assert "must be a standard resource type or fully qualified" in body_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_body("p", requests={"nvidia.com/gpu": "1"}))
    assert "Limit must be set for non overcommitable resources" in body_of(err.value)["message"]
    with pytest.raises(ApiException) as err:
        core.create_namespaced_service(ns, {"metadata": {"name": "1svc"},
                                            "spec": {"ports": [{"port": 80}]}})
    assert "DNS-1035 label" in body_of(err.value)["message"]


def test_unknown_fields_warn_or_refuse(core, ns, api) -> None:
    body = pod_body("p")
    body["spec"]["containers"][0]["imagePulPolicy"] = "Always"  # typo
    path = f"/api/v1/namespaces/{ns}/pods"
    strict = raw_request(api, "POST", path + "?fieldValidation=Strict", body)
    assert strict.status == 400
    assert json.loads(strict.data)["message"] == (
        'strict decoding error: unknown field "spec.containers[0].imagePulPolicy"')
    warned = raw_request(api, "POST", path, body)
    assert warned.status == 201
    assert 'unknown field \\"spec.containers[0].imagePulPolicy\\"' in warned.getheader(
        "Warning")
    stored = core.read_namespaced_pod("p", ns, _preload_content=False)
    assert "imagePulPolicy" not in json.loads(stored.data)["spec"]["containers"][0]


def test_job_template_rules(batch, ns) -> None:
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "i:1"}]}}}}
    with pytest.raises(ApiException) as err:
        batch.create_namespaced_job(ns, job)
    assert body_of(err.value)["message"] == (
        'Job.batch "j" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
        '"Always": supported values: "OnFailure", "Never"')


def test_unauthenticated_is_401(kube_api, tmp_path) -> None:
    with sync_client(kube_api, tmp_path, token="wrong") as api, pytest.raises(ApiException) as err:
        client.CoreV1Api(api).list_namespaced_pod("default")
    assert err.value.status == 401 and body_of(err.value) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_rbac_namespace_role(kube_api, core, tmp_path) -> None:
    token = kube_api.token_for("alice", "notebook")
    core.create_namespace({"metadata": {"name": "bob"}})
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    rbac.create_namespaced_role("alice", {"metadata": {"name": "runner"}, "rules": [
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list",
                                                                        "create"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
         "resourceNames": ["settings"]}]})
    rbac.create_namespaced_role_binding("alice", {
        "metadata": {"name": "runner"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "runner"},
        "subjects": [{"kind": "ServiceAccount", "name": "notebook", "namespace": "alice"}]})
    with sync_client(kube_api, tmp_path, token=token) as api:
        v1 = client.CoreV1Api(api)
        v1.create_namespaced_pod("alice", pod_body("mine"))
        assert [p.metadata.name for p in v1.list_namespaced_pod("alice").items] == ["mine"]
        with pytest.raises(ApiException) as err:
            v1.list_namespaced_pod("bob")
        assert err.value.status == 403
        assert body_of(err.value)["message"] == (
            'pods is forbidden: User "system:serviceaccount:alice:notebook" cannot list '
            'resource "pods" in API group "" in the namespace "bob"')
        with pytest.raises(ApiException) as err:
            v1.delete_namespaced_pod("mine", "alice")
        assert 'pods "mine" is forbidden' in body_of(err.value)["message"]
        with pytest.raises(ApiException) as err:
            v1.read_namespaced_config_map("other", "alice")
        assert err.value.status == 403
        with pytest.raises(ApiException) as err:
            v1.read_namespaced_config_map("settings", "alice")
        assert err.value.status == 404  # allowed by resourceNames, just absent
        with pytest.raises(ApiException) as err:
            client.BatchV1Api(api).list_namespaced_job("alice")
        assert 'cannot list resource "jobs" in API group "batch"' in body_of(
            err.value)["message"]
        with pytest.raises(ApiException) as err:  # cannot grant what it does not hold
            client.RbacAuthorizationV1Api(api).create_namespaced_role("alice", {
                "metadata": {"name": "more"},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})
        assert err.value.status == 403
    core.delete_namespaced_service_account("notebook", "alice")
    with sync_client(kube_api, tmp_path, token=token) as api:
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(api).list_namespaced_pod("alice")
        assert err.value.status == 401  # tokens die with their ServiceAccount


def test_token_request_and_cluster_role_binding(kube_api, core, tmp_path) -> None:
    core.create_namespace({"metadata": {"name": "hub"}})
    core.create_namespaced_service_account("hub", {"metadata": {"name": "hub"}})
    token = core.create_namespaced_service_account_token(
        "hub", "hub", {"spec": {"expirationSeconds": 600}}).status.token
    client.RbacAuthorizationV1Api(core.api_client).create_cluster_role_binding({
        "metadata": {"name": "hub-view"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "hub", "namespace": "hub"}]})
    with sync_client(kube_api, tmp_path, token=token) as api:
        assert client.CoreV1Api(api).list_namespaced_pod("default").items == []
        with pytest.raises(ApiException) as err:
            client.CoreV1Api(api).list_node()
        assert body_of(err.value)["message"].endswith('in API group "" at the cluster scope')


def test_quota_refusal_and_status(kube_api, core, ns) -> None:
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "gpu"}, "spec": {"hard": {
        "requests.nvidia.com/gpu": "2", "pods": "5"}}})
    core.create_namespaced_pod(ns, pod_body("one", limits={"nvidia.com/gpu": "1"}))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_body("two", limits={"nvidia.com/gpu": "2"}))
    assert err.value.status == 403
    assert body_of(err.value)["message"] == (
        'pods "two" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=2")
    quota = core.read_namespaced_resource_quota("gpu", ns)
    assert quota.status.used == {"requests.nvidia.com/gpu": "1", "pods": "1"}
    kube_api.add_node("n", gpus=4)
    kube_api.succeed_pod(ns, "one")  # finished pods stop counting
    assert core.read_namespaced_resource_quota("gpu", ns).status.used[
        "requests.nvidia.com/gpu"] == "0"
    core.create_namespaced_pod(ns, pod_body("two", limits={"nvidia.com/gpu": "2"}))


def test_quota_requires_requests_for_constrained_resources(core, ns) -> None:
    core.create_namespaced_resource_quota(ns, {"metadata": {"name": "cpu"},
                                               "spec": {"hard": {"requests.cpu": "4"}}})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod_body("p"))
    assert body_of(err.value)["message"] == (
        'pods "p" is forbidden: failed quota: cpu: must specify requests.cpu for: main')
