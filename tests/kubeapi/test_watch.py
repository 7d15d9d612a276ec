"""Watch streams with both official clients: events, resume, 410 Expired, bookmarks."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from kubernetes import watch
from kubernetes.client import ApiException

from .conftest import pod_body


def test_sync_watch_added_modified_deleted(core, ns) -> None:
    start = core.list_namespaced_pod(ns).metadata.resource_version

    def churn() -> None:
        core.create_namespaced_pod(ns, pod_body("p"))
        core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"x": "1"}}})
        core.delete_namespaced_pod("p", ns)

    threading.Thread(target=churn).start()
    seen = []
    w = watch.Watch()
    for event in w.stream(core.list_namespaced_pod, ns, resource_version=start,
                          timeout_seconds=5):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_watch_resume_and_selector_transitions(core, ns) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    rv = core.read_namespaced_pod("p", ns).metadata.resource_version
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"sel": "yes"}}})
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"sel": "no"}}})
    events = [(e["type"], e["object"].metadata.labels) for e in watch.Watch().stream(
        core.list_namespaced_pod, ns, label_selector="sel=yes", resource_version=rv,
        timeout_seconds=1)]
    # entering the selector is ADDED, leaving it is DELETED, as on a real API server
    assert [t for t, _ in events] == ["ADDED", "DELETED"]


def test_watch_from_compacted_version_gets_410(core, ns, kube_api) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    old_rv = core.read_namespaced_pod("p", ns).metadata.resource_version
    core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"a": "b"}}})
    kube_api.compact_history()
    with pytest.raises(ApiException) as err:
        list(watch.Watch().stream(core.list_namespaced_pod, ns, resource_version=old_rv,
                                  timeout_seconds=1))
    assert err.value.status == 410 and "too old resource version" in err.value.reason


def test_history_window_is_configurable(core, ns, kube_api) -> None:
    kube_api.history_size = 3
    core.create_namespaced_pod(ns, pod_body("p"))
    rv = core.read_namespaced_pod("p", ns).metadata.resource_version
    for i in range(5):
        core.patch_namespaced_pod("p", ns, {"metadata": {"labels": {"i": str(i)}}})
    raw = core.list_namespaced_pod(ns, watch=True, resource_version=rv, timeout_seconds=1,
                                   _preload_content=False)
    first = json.loads(raw.readline())
    assert first["type"] == "ERROR" and first["object"]["code"] == 410
    assert first["object"]["reason"] == "Expired"


def test_bookmarks_and_initial_events(core, ns, kube_api) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    raw = core.list_namespaced_pod(ns, watch=True, allow_watch_bookmarks=True,
                                   send_initial_events=True,
                                   resource_version_match="NotOlderThan",
                                   timeout_seconds=1, _preload_content=False)
    lines = [json.loads(line) for line in raw.read().decode().splitlines()]
    assert lines[0]["type"] == "ADDED" and lines[0]["object"]["metadata"]["name"] == "p"
    assert lines[1]["type"] == "BOOKMARK"
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_legacy_watch_path(api, ns, core) -> None:
    core.create_namespaced_pod(ns, pod_body("p"))
    response = api.call_api("GET", f"{api.configuration.host}/api/v1/watch/namespaces/{ns}"
                            f"/pods/p?timeoutSeconds=1",
                            header_params={"Authorization": api.configuration.api_key[
                                "BearerToken"]} if api.configuration.api_key else {})
    body = response.read().decode()
    assert json.loads(body.splitlines()[0])["object"]["metadata"]["name"] == "p"


def test_asyncio_watch_and_kubespawner_style_pod(kube_api, tmp_path) -> None:
    """KubeSpawner's path: kubernetes_asyncio models, ApiClient serialization, a raw watch."""
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig
    from kubernetes_asyncio import watch as awatch

    path = kube_api.write_kubeconfig(tmp_path / "kc")

    async def scenario() -> list[tuple[str, str]]:
        await aconfig.load_kube_config(config_file=str(path))
        async with aclient.ApiClient() as api:
            v1 = aclient.CoreV1Api(api)
            await v1.create_namespace(aclient.V1Namespace(
                metadata=aclient.V1ObjectMeta(name="hub")))
            pod = aclient.V1Pod(
                metadata=aclient.V1ObjectMeta(name="jupyter-ada", labels={"component":
                                                                         "singleuser-server"}),
                spec=aclient.V1PodSpec(containers=[aclient.V1Container(
                    name="notebook", image="jupyter/base-notebook:latest",
                    ports=[aclient.V1ContainerPort(container_port=8888, name="notebook-port")],
                    resources=aclient.V1ResourceRequirements(limits={"nvidia.com/gpu": "1"}))],
                    restart_policy="OnFailure"))
            await v1.create_namespaced_pod("hub", pod)
            back = await v1.read_namespaced_pod("jupyter-ada", "hub")
            assert back.spec.containers[0].resources.requests == {"nvidia.com/gpu": "1"}
            raw = await v1.list_namespaced_pod("hub", _preload_content=False)
            listed = json.loads(await raw.read())
            seen = []
            w = awatch.Watch()
            async with w.stream(v1.list_namespaced_pod, "hub",
                                label_selector="component=singleuser-server",
                                resource_version=listed["metadata"]["resourceVersion"],
                                timeout_seconds=3) as stream:
                await asyncio.to_thread(kube_api.add_node, "gpu-1", gpus=1)
                await asyncio.to_thread(kube_api.run_pod, "hub", "jupyter-ada")
                async for event in stream:
                    seen.append((event["type"], event["raw_object"]["status"]["phase"]))
                    if event["raw_object"]["status"]["phase"] == "Running":
                        break
            return seen

    seen = asyncio.run(scenario())
    assert seen[0] == ("MODIFIED", "Pending") and seen[-1] == ("MODIFIED", "Running")
