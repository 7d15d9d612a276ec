"""Served services on the real control plane, with the notebook's own token: a version's
Deployment, Service and autoscaler in a namespace that enforces `restricted` Pod Security, its
pods running on KWOK's nodes; KServe's InferenceService and the Gateway API's HTTPRoute checked
against the schemas their projects publish (controlplane/crds.py installs them from the Go
modules cluster/addons pins, and removes them afterwards so other tests see a plain cluster).
The sidebar's traffic dialog is driven in Chromium against a JupyterLab on this cluster (the
extension built first, as for tests/browser/).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane.cluster import ControlPlane
from controlplane.crds import GATEWAY_API, KSERVE, published_crds
from jupyter_server_process import JupyterServer
from kube_support import IMAGE, wait_for
from kubernetes import client

from kubelab.backends.kubernetes.api import KubeApi
from kubelab.backends.kubernetes.backend import KubernetesBackend
from kubelab.backends.kubernetes.serving import (
    ServiceTarget,
    inference_service,
    service,
    version_objects,
)
from kubelab.backends.kubernetes.serving_routes import Traffic, http_route, route_traffic, split
from kubelab.errors import ValidationError
from kubelab.experiments import Experiments
from kubelab.serving.cluster import ClusterServices
from kubelab.serving.cluster import services as services_for
from kubelab.serving.spec import ServiceSpec

pytestmark = pytest.mark.cluster


def spec_of(version: str = "1", **fields: Any) -> ServiceSpec:
    data: dict[str, Any] = {
        "name": "iris",
        "version": version,
        "command": ["python", "-m", "http.server", "{{ port }}"],
        "image": IMAGE,
        "resources": {"cpu": "500m", "memory": "256Mi"},
        "replicas": {"min": 2, "max": 4},
        **fields,
    }
    return ServiceSpec.parse(data)


@pytest.fixture
def kube(make_backend: Callable[..., KubernetesBackend]) -> KubernetesBackend:
    """The notebook's token (only notebook-role.yaml's rights) and settings."""
    return make_backend(start=False)


@pytest.fixture
def api(kube: KubernetesBackend) -> KubeApi:
    return kube.api


@pytest.fixture
def restricted(admin: client.ApiClient, namespace: str) -> str:
    """The namespace enforcing the `restricted` Pod Security level."""
    labels = {"pod-security.kubernetes.io/enforce": "restricted"}
    client.CoreV1Api(admin).patch_namespace(namespace, {"metadata": {"labels": labels}})
    return namespace


@pytest.fixture
def install(simulated_cluster: ControlPlane) -> Iterator[Callable[..., None]]:
    """Install published CRDs for this test only."""
    installed: list[str] = []

    def install(*names: str) -> None:
        for crd in published_crds(*names):
            simulated_cluster.install_crd(crd, timeout=60)
            installed.append(crd["metadata"]["name"])

    yield install
    for name in installed:
        simulated_cluster.remove_crd(name, timeout=60)


@pytest.fixture
def addons(install: Callable[..., None], simulated_cluster: ControlPlane) -> ControlPlane:
    """KServe's and the Gateway API's published CRDs, for this test only."""
    install(KSERVE, *GATEWAY_API)
    return simulated_cluster


def target(api: KubeApi) -> ServiceTarget:
    argv = ["python", "-m", "http.server", "8080"]
    return ServiceTarget(api.namespace, "alice", argv, run="run1", path="outputs/m")


def running_version_pods(admin: client.ApiClient, namespace: str, version: str) -> list[dict[str, Any]]:
    selector = f"kubelab.io/service=iris,kubelab.io/service-version={version}"
    pods = KubeApi(admin, namespace).list("Pod", selector)["items"]
    return [
        p
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def read(admin: client.ApiClient, namespace: str, kind: str, name: str) -> dict[str, Any]:
    found = KubeApi(admin, namespace).get(kind, name)
    assert found is not None, f"{kind} {name} is missing"
    return found


def test_a_version_runs_as_a_restricted_deployment_on_kwok_nodes(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    kube: KubernetesBackend,
    api: KubeApi,
    restricted: str,
) -> None:
    node = project_node(cpu="8", memory="32Gi")
    made = [api.apply(obj) for obj in version_objects(spec_of(), target(api), kube.nb)]
    assert [o["kind"] for o in made] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    pods = wait_for(
        lambda: len(p := running_version_pods(admin, restricted, "1")) == 2 and p, 60, "2 running pods"
    )
    assert {p["spec"]["nodeName"] for p in pods} == {node}
    pod = pods[0]
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "kubelab-service"
    (svc,) = [o for o in made if o["kind"] == "Service"]
    assert svc["spec"]["type"] == "ClusterIP" and svc["metadata"]["name"] == "iris-v1"
    scaler = read(admin, restricted, "HorizontalPodAutoscaler", "iris-v1")
    assert (scaler["spec"]["minReplicas"], scaler["spec"]["maxReplicas"]) == (2, 4)
    assert sorted(m["resource"]["name"] for m in scaler["spec"]["metrics"]) == ["cpu", "memory"]
    # the controller took it on (it has no metrics server here to scale by)
    wait_for(
        lambda: (
            read(admin, restricted, "HorizontalPodAutoscaler", "iris-v1").get("status", {}).get("conditions")
        ),
        60,
        "the autoscaler's conditions",
    )


def test_a_fixed_size_service_gets_no_autoscaler_and_a_second_version_lives_beside_the_first(
    project_node: Callable[..., str],
    admin: client.ApiClient,
    kube: KubernetesBackend,
    api: KubeApi,
    restricted: str,
) -> None:
    project_node(cpu="8", memory="32Gi")
    for version in ("1", "2"):
        for obj in version_objects(spec_of(version, replicas=1), target(api), kube.nb):
            api.apply(obj)
    api.apply(service(spec_of("2"), target(api), version="1"))  # the stable Service: version 1
    wait_for(
        lambda: running_version_pods(admin, restricted, "1") and running_version_pods(admin, restricted, "2"),
        60,
    )
    assert KubeApi(admin, restricted).list("HorizontalPodAutoscaler")["items"] == []
    stable = read(admin, restricted, "Service", "iris")
    assert stable["spec"]["selector"] == {"kubelab.io/service": "iris", "kubelab.io/service-version": "1"}


def test_kserve_takes_a_version_with_gpus_and_a_canary_for_the_next(
    addons: ControlPlane, kube: KubernetesBackend, api: KubeApi
) -> None:
    gpu = spec_of(
        resources={"cpu": "1", "memory": "2Gi", "gpus": 1, "gpu_type": "A100"}, replicas={"min": 0, "max": 3}
    )
    first = api.apply(inference_service(gpu, target(api), kube.nb))
    predictor = first["spec"]["predictor"]
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (0, 3)
    assert predictor["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert predictor["nodeSelector"]["gpu-type"] == "A100"
    assert first["metadata"]["labels"]["networking.kserve.io/visibility"] == "cluster-local"
    second = api.apply(inference_service(spec_of("2", replicas=1), target(api), kube.nb, canary=10))
    assert second["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert second["metadata"]["labels"]["kubelab.io/service-version"] == "2"
    # the published schema refuses what KServe does not know (strict field validation)
    wrong = inference_service(spec_of("3"), target(api), kube.nb)
    wrong["spec"]["predictor"]["canaryPercent"] = 5
    with pytest.raises(client.ApiException) as refusal:
        api.apply(wrong)
    assert "canaryPercent" in str(refusal.value.body)


def test_an_httproute_splits_and_mirrors_between_versions(addons: ControlPlane, api: KubeApi) -> None:
    labels = {"kubelab.io/service": "iris"}
    traffic = split("iris", ["1", "2"], {"2": 10}, {"2": 100})
    assert traffic == Traffic({"1": 90, "2": 10}, {"2": 100})
    route = api.apply(http_route("iris", api.namespace, 8080, traffic, labels))
    assert route_traffic(route, "iris") == traffic
    (rule,) = route["spec"]["rules"]
    assert [(b["name"], b["weight"]) for b in rule["backendRefs"]] == [("iris-v1", 90), ("iris-v2", 10)]
    assert route["spec"]["parentRefs"][0] == {"group": "", "kind": "Service", "name": "iris", "port": 8080}
    whole = api.apply(http_route("iris", api.namespace, 8080, split("iris", ["1", "2"], {"2": 100}), labels))
    assert route_traffic(whole, "iris") == Traffic({"1": 0, "2": 100})


# -- the services' adapter: what `kubelab serve` and `kubelab service` call with KUBELAB_BACKEND=kubernetes


@pytest.fixture
def services(kube: KubernetesBackend, home: Path) -> ClusterServices:
    found = services_for(lab=Experiments(home=home, backend=kube, user="alice"))
    assert isinstance(found, ClusterServices)
    return found


def command_service(version: str) -> dict[str, Any]:
    return {
        "kind": "service",
        "name": "iris",
        "version": version,
        "image": IMAGE,
        "command": "python -m http.server {{ port }}",
        "resources": {"cpu": "250m", "memory": "128Mi"},
    }


@pytest.fixture
def two_versions(install: Callable[..., None], services: ClusterServices) -> ClusterServices:
    """iris versions 1 and 2 on a cluster that serves the Gateway API: an HTTPRoute splits
    between them."""
    install(*GATEWAY_API)
    services.start(command_service("1"))
    services.start(command_service("2"))
    return services


@pytest.fixture
def server_env(notebook_kubeconfig: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A notebook server's environment on the cluster backend, with the notebook's token."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # the kubeconfig, not in-cluster
    return {"KUBELAB_BACKEND": "kubernetes", "KUBECONFIG": str(notebook_kubeconfig), "KUBELAB_IMAGE": IMAGE}


def route_split(admin: client.ApiClient, namespace: str) -> Traffic:
    """The split and mirror iris's HTTPRoute holds now."""
    return route_traffic(read(admin, namespace, "HTTPRoute", "iris"), "iris")


def refused_field(call: Callable[[], Any]) -> list[str]:
    with pytest.raises(ValidationError) as refusal:
        call()
    return [f.path for f in refusal.value.fields]


def test_a_second_version_rolls_out_beside_the_first_and_takes_the_service_whole(
    project_node: Callable[..., str], services: ClusterServices, admin: client.ApiClient, namespace: str
) -> None:
    """Without KServe or the Gateway API the stable Service points at one version."""
    project_node(cpu="8", memory="32Gi")
    first = services.start(command_service("1"))
    assert (first["id"], first["traffic"], first["url"]) == (
        "iris-v1",
        100,
        f"http://iris.{namespace}.svc:8080/",
    )
    assert services.wait("iris-v1", 60)["state"] == "Running"
    services.start(command_service("2"))
    assert [(v["id"], v["traffic"]) for v in services.list()] == [("iris-v1", 100), ("iris-v2", 0)]
    assert refused_field(lambda: services.start(command_service("2"))) == ["version"]
    assert refused_field(lambda: services.traffic("iris", ["2=10"])) == ["traffic"]  # a split needs a router
    assert refused_field(lambda: services.traffic("iris", ["3=100"])) == ["traffic.3"]
    assert refused_field(lambda: services.delete("iris-v1")) == ["traffic.1"]  # it still answers
    assert read(admin, namespace, "Service", "iris")["spec"]["selector"]["kubelab.io/service-version"] == "1"
    moved = services.traffic("iris", ["2=100"])
    assert [(v["id"], v["traffic"]) for v in moved] == [("iris-v1", 0), ("iris-v2", 100)]
    assert read(admin, namespace, "Service", "iris")["spec"]["selector"]["kubelab.io/service-version"] == "2"
    stopped = services.stop("iris-v1")
    assert stopped["state"] == "Stopped" and stopped["replicas_wanted"] == {"min": 1, "max": 1}
    services.delete("iris-v1")
    assert [v["id"] for v in services.list()] == ["iris-v2"]
    services.delete("iris")
    assert services.list() == [] and KubeApi(admin, namespace).get("Service", "iris") is None


def test_the_gateway_api_splits_and_mirrors_a_new_version(
    two_versions: ClusterServices, admin: client.ApiClient, namespace: str
) -> None:
    services = two_versions
    assert route_split(admin, namespace) == Traffic({"1": 100, "2": 0})  # a new version gets nothing yet
    views = services.traffic("iris", ["2=10"], ["2=100"])
    assert [(v["version"], v["traffic"], v["mirror"]) for v in views] == [("1", 90, 0), ("2", 10, 100)]
    assert route_split(admin, namespace) == Traffic({"1": 90, "2": 10}, {"2": 100})
    before = read(admin, namespace, "HTTPRoute", "iris")["metadata"]["resourceVersion"]
    assert refused_field(lambda: services.traffic("iris", ["1=50", "2=60"])) == ["traffic"]
    assert (
        read(admin, namespace, "HTTPRoute", "iris")["metadata"]["resourceVersion"] == before
    )  # nothing changed


def test_the_notebook_s_server_splits_traffic_over_rest(
    two_versions: ClusterServices,
    server_env: dict[str, str],
    admin: client.ApiClient,
    namespace: str,
    home: Path,
    tmp_path: Path,
) -> None:
    """`POST /kubelab/api/services/<name>/traffic`, as the sidebar's dialog sends it: the CLI's
    split and mirror, with the notebook's token; a refused body names its field and changes
    nothing; an empty mirror (the dialog's `none`) removes the mirror."""
    env = {**server_env, "KUBELAB_MACHINE_DIR": str(tmp_path / "machine")}
    (tmp_path / "root").mkdir()
    with JupyterServer(tmp_path / "root", home, env=env) as server:
        moved = server.post("services/iris/traffic", {"traffic": {"2": 10}, "mirror": {"2": 100}})
        assert moved.status_code == 200, moved.text
        views = [(v["id"], v["traffic"], v["mirror"]) for v in moved.json()["items"]]
        assert views == [("iris-v1", 90, 0), ("iris-v2", 10, 100)]
        route = read(admin, namespace, "HTTPRoute", "iris")
        assert route_traffic(route, "iris") == Traffic({"1": 90, "2": 10}, {"2": 100})
        for body, field in (
            ({"traffic": {"3": 10}}, "traffic.3"),  # no such version
            ({"traffic": {"1": 60, "2": 60}}, "traffic"),  # more than 100
            ({"traffic": {"1": 50, "2": 40}}, "traffic"),  # all named, not 100
            ({"traffic": {"2": "ten"}}, "traffic.2"),
        ):
            answer = server.post("services/iris/traffic", body)
            assert answer.status_code == 422, (body, answer.text)
            assert field in {f["path"] for f in answer.json()["fields"]}, answer.text
        assert server.post("services/nosuch/traffic", {"traffic": {"2": 10}}).status_code == 404
        unchanged = read(admin, namespace, "HTTPRoute", "iris")["metadata"]["resourceVersion"]
        assert unchanged == route["metadata"]["resourceVersion"]
        listed = {v["id"]: (v["traffic"], v["mirror"]) for v in server.get("services").json()["items"]}
        assert listed == {"iris-v1": (90, 0), "iris-v2": (10, 100)}  # what the sidebar's rows show
        # The sidebar's dialog with its mirror set to none sends an empty mirror: it is removed.
        unmirrored = server.post("services/iris/traffic", {"traffic": {"1": 90, "2": 10}, "mirror": {}})
        assert [(v["traffic"], v["mirror"]) for v in unmirrored.json()["items"]] == [(90, 0), (10, 0)]
        assert route_split(admin, namespace) == Traffic({"1": 90, "2": 10}, {})


def test_the_sidebar_s_traffic_dialog_splits_and_mirrors_in_chromium(
    two_versions: ClusterServices,
    server_env: dict[str, str],
    admin: client.ApiClient,
    namespace: str,
    home: Path,
    tmp_path: Path,
) -> None:
    """A real JupyterLab on the cluster backend: a version's share opens the traffic dialog; a
    split with a mirror to version 2 reaches the HTTPRoute and version 2's row shows the copied
    share; the dialog opens again filled with that mirror, and `none` removes it."""
    from browser.conftest import CHROMIUM, CHROMIUM_ARGS, lab_at
    from browser.test_sidebar import WAIT_MS, open_panel
    from playwright.sync_api import Page, expect, sync_playwright

    env = {**server_env, "KUBELAB_HOME": str(home)}

    def apply(page: Page, shares: dict[str, str], mirror_to: str, percent: str | None = None) -> None:
        row = page.locator('.jp-kubelab-Service[data-service-id="iris-v1"]')
        row.locator("button.jp-kubelab-Service-traffic").click()
        dialog = page.locator(".jp-Dialog")
        for version, share in shares.items():
            dialog.locator(f'input[name="v{version}"]').fill(share)
        dialog.locator('select[name="mirror-to"]').select_option(mirror_to)
        if percent is not None:
            dialog.locator('input[name="mirror-percent"]').fill(percent)
        dialog.get_by_role("button", name="Apply").click()
        expect(dialog).to_have_count(0)

    with lab_at(tmp_path / "lab", **env) as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.goto(f"{server.url}lab?token={server.token}")
            expect(page.locator("#jupyterlab-splash")).to_have_count(0, timeout=WAIT_MS)
            open_panel(page)
            second = page.locator('.jp-kubelab-Service[data-service-id="iris-v2"]')
            expect(second.locator(".jp-kubelab-Service-traffic")).to_have_text("0%", timeout=WAIT_MS)
            expect(second.locator(".jp-kubelab-Service-mirror")).to_have_count(0)

            apply(page, {"1": "90", "2": "10"}, "2", "100")
            expect(second.locator(".jp-kubelab-Service-traffic")).to_have_text("10%")
            expect(second.locator(".jp-kubelab-Service-mirror")).to_have_text("mirror 100%")
            assert route_split(admin, namespace) == Traffic({"1": 90, "2": 10}, {"2": 100})

            page.locator(
                '.jp-kubelab-Service[data-service-id="iris-v1"] button.jp-kubelab-Service-traffic'
            ).click()
            dialog = page.locator(".jp-Dialog")
            expect(dialog.locator('select[name="mirror-to"]')).to_have_value("2")  # the mirror now
            expect(dialog.locator('input[name="mirror-percent"]')).to_have_value("100")
            dialog.get_by_role("button", name="Cancel").click()
            expect(dialog).to_have_count(0)

            apply(page, {}, "")  # none
            expect(second.locator(".jp-kubelab-Service-mirror")).to_have_count(0)
            assert route_split(admin, namespace) == Traffic({"1": 90, "2": 10}, {})
        finally:
            browser.close()


def test_kserve_rolls_a_new_version_out_as_its_canary(
    install: Callable[..., None], services: ClusterServices, admin: client.ApiClient, namespace: str
) -> None:
    install(KSERVE)
    services.start(command_service("1"))
    second = services.start(command_service("2"))
    assert (second["traffic"], second["state"]) == (0, "Pending")  # no KServe controller runs here
    assert services.traffic("iris", ["2=10"])[1]["traffic"] == 10
    isvc = read(admin, namespace, "InferenceService", "iris")
    assert isvc["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert refused_field(lambda: services.traffic("iris", ["2=10"], ["2=100"])) == ["mirror"]


def test_the_cli_serves_on_the_cluster_with_the_kubernetes_backend(
    services: ClusterServices, notebook_kubeconfig: Path, home: Path
) -> None:
    """`kubelab service` in a notebook whose backend is Kubernetes reads the namespace's services."""
    services.start(command_service("1"))
    env = {
        **os.environ,
        "KUBELAB_BACKEND": "kubernetes",
        "KUBECONFIG": str(notebook_kubeconfig),
        "KUBELAB_HOME": str(home),
        "KUBELAB_IMAGE": IMAGE,
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)

    def kubelab(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "kubelab.cli", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    listed = kubelab("service", "ls", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [v["id"] for v in json.loads(listed.stdout)["items"]] == ["iris-v1"]
    refused = kubelab("service", "traffic", "iris", "5=10")
    assert refused.returncode != 0 and "traffic.5: service iris has no version 5" in refused.stderr


def test_a_model_is_served_by_mlserver_from_the_workspace(
    services: ClusterServices, admin: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "model.joblib").write_bytes(b"a model")
    (tmp_path / "outputs" / "model.onnx").write_bytes(b"a model")
    model = {"kind": "service", "name": "iris", "model": "outputs/model.joblib", "image": IMAGE}
    view = services.start(model, base_dir=tmp_path, confine=True)
    assert view["lineage"] == {
        "file": "outputs/model.joblib",
        "path": str(tmp_path / "outputs" / "model.joblib"),
    }
    assert view["endpoint"] == "v2/models/iris/infer"
    container = read(admin, namespace, "Deployment", "iris-v1")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in container["env"]}
    assert env["MLSERVER_MODEL_URI"] == str(tmp_path / "outputs" / "model.joblib")
    assert env["MLSERVER_MODEL_IMPLEMENTATION"] == "mlserver_sklearn.SKLearnModel"
    assert (env["MLSERVER_HOST"], env["MLSERVER_HTTP_PORT"]) == ("0.0.0.0", "8080")
    probe = container["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == (ServiceSpec.parse(model).readiness_path, 8080)
    for path, field in [
        ("/etc/hostname", "model.path"),  # outside the workspace
        ("outputs/missing.joblib", "model.path"),
        ("outputs/model.onnx", "model.path"),  # no runtime
    ]:
        bad = {**model, "version": "2", "model": path}
        start = functools.partial(services.start, bad, base_dir=tmp_path, confine=True)
        assert refused_field(start) == [field]
    assert services.versions("iris") == ["1"]  # nothing was made
