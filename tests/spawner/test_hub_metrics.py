"""Hub metrics: GPUs allocated by type, group and user, experiments running and queued.

The families are computed from a snapshot of nodes and pods (what the availability watch
mirrors); here they are exported through prometheus_client's own text format, as
JupyterHub's /hub/metrics does, and parsed back with its parser.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kubelab.spawner.metrics import LabCollector, experiments, families, gpus_allocated
from kubelab.spawner.profiles import Catalog

CATALOG = Catalog.parse(
    {"gpu_types": [{"name": "V100", "label_value": "V100"}, {"name": "T4", "label_value": "T4"}]}
)


def node(name: str, gpu_type: str | None, gpus: int) -> dict[str, Any]:
    labels = {"gpu-type": gpu_type} if gpu_type else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}},
    }


def pod(
    name: str,
    *,
    node_name: str | None = None,
    gpus: int = 0,
    phase: str = "Running",
    labels: dict[str, Any] | None = None,
) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "metadata": {"name": name, "namespace": "u", "labels": labels or {}},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": phase},
    }


def experiment(run: str, user: str) -> dict[str, Any]:
    return {
        "app.kubernetes.io/name": "kubelab-experiment",
        "kubelab.io/experiment": run,
        "kubelab.io/user": user,
    }


NODES = [node("v1", "V100", 8), node("t1", "T4", 4), node("cpu", None, 0)]
PODS = [
    pod(
        "jupyter-alice",
        node_name="v1",
        gpus=2,
        labels={"kubelab.io/user": "alice", "kubelab.io/group": "vision"},
    ),
    pod("a-run-0", node_name="v1", gpus=1, labels=experiment("r1", "alice")),
    pod(
        "a-run-1", node_name="v1", gpus=1, phase="Pending", labels=experiment("r1", "alice")
    ),  # bound, starting
    pod("b-run-0", gpus=4, phase="Pending", labels=experiment("r2", "bob")),  # not scheduled: holds nothing
    pod("b-done", node_name="t1", gpus=1, phase="Succeeded", labels=experiment("r3", "bob")),
    pod("carol", node_name="t1", gpus=1, labels={"kubelab.io/user": "carol"}),
    pod("cpu-only", node_name="cpu", labels=experiment("r4", "carol")),
]


def test_gpus_allocated_by_type_group_and_user() -> None:
    assert gpus_allocated(NODES, PODS, CATALOG) == {
        ("V100", "vision", "alice"): 2,
        ("V100", "", "alice"): 2,
        ("T4", "", "carol"): 1,
    }


def test_experiments_running_and_queued() -> None:
    assert experiments(PODS) == {("running", "alice"): 1, ("queued", "bob"): 1, ("running", "carol"): 1}


def test_scrape_text_follows_jupyterhubs_naming() -> None:
    registry = CollectorRegistry()
    registry.register(LabCollector(lambda: (NODES, PODS, CATALOG, [])))
    parsed = {f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())}
    assert set(parsed) == {
        "jupyterhub_kubelab_gpus_allocated",
        "jupyterhub_kubelab_gpus_total",
        "jupyterhub_kubelab_gpus_free",
        "jupyterhub_kubelab_experiments",
        "jupyterhub_kubelab_gpu_hours",
    }
    samples = {(f.name, tuple(sorted(s.labels.items()))): s.value for f in parsed.values() for s in f.samples}
    assert (
        samples[
            (
                "jupyterhub_kubelab_gpus_allocated",
                (("gpu_type", "V100"), ("group", "vision"), ("user", "alice")),
            )
        ]
        == 2
    )
    assert samples[("jupyterhub_kubelab_gpus_total", (("gpu_type", "V100"),))] == 8
    assert samples[("jupyterhub_kubelab_gpus_free", (("gpu_type", "V100"),))] == 4
    assert samples[("jupyterhub_kubelab_gpus_free", (("gpu_type", "T4"),))] == 3
    assert samples[("jupyterhub_kubelab_experiments", (("state", "queued"), ("user", "bob")))] == 1


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_gpu_hours_by_user_and_group_add_up_scrape_by_scrape_against_the_namespaces_owner() -> None:
    clock = [1000.0]
    # mallory's namespace; her pod's labels claim alice and vision
    namespaces = [
        {
            "metadata": {
                "name": "u",
                "labels": {"app.kubernetes.io/managed-by": "kubelab", "kubelab.io/user": "mallory"},
                "annotations": {"kubelab.io/group": "public"},
            }
        }
    ]
    snapshot: list[Any] = [NODES, PODS, CATALOG, namespaces]
    registry = CollectorRegistry()
    registry.register(
        LabCollector(lambda: (snapshot[0], snapshot[1], snapshot[2], snapshot[3]), lambda: clock[0])
    )
    total = "jupyterhub_kubelab_gpu_hours_total"
    mallory = (total, (("gpu_type", "V100"), ("group", "public"), ("user", "mallory")))
    carol = (total, (("gpu_type", "T4"), ("group", "public"), ("user", "mallory")))
    assert scrape(registry)[mallory] == 0  # the first scrape only sees what is held
    clock[0] += 1800
    first = scrape(registry)
    assert first[mallory] == 2.0 and first[carol] == 0.5  # 4 V100s and 1 T4 for half an hour
    assert not [key for key in first if key[0] == total and ("user", "alice") in key[1]]
    snapshot[1] = [p for p in PODS if p["metadata"]["name"] != "jupyter-alice"]  # 2 V100s let go
    clock[0] += 3600
    second = scrape(registry)
    assert second[mallory] == 2.0 + 4.0  # the hour counts what the last scrape saw held: 4
    clock[0] += 3600
    assert scrape(registry)[mallory] == 6.0 + 2.0  # a counter: it never goes down
    clock[0] -= 10  # a clock that stepped back adds nothing
    assert scrape(registry)[mallory] == 8.0


def test_no_snapshot_yet_exports_nothing() -> None:
    registry = CollectorRegistry()
    registry.register(LabCollector(lambda: None))
    assert "kubelab" not in generate_latest(registry).decode()
    assert [f.name for f in families([], [], CATALOG)] == [
        "jupyterhub_kubelab_gpus_allocated",
        "jupyterhub_kubelab_gpus_total",
        "jupyterhub_kubelab_gpus_free",
        "jupyterhub_kubelab_experiments",
    ]


def test_the_example_dashboard_queries_only_metrics_the_hub_exports() -> None:
    import json
    import re
    from pathlib import Path

    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "hub_config" / "grafana-dashboard.json").read_text()
    )
    from kubelab_testing import JsonStandIn

    from kubelab.spawner.utilisation_metrics import DcgmUtilisation

    dcgm = {"metric": {"exported_namespace": "u", "exported_pod": "carol"}, "value": [0, "50"]}
    answer = {"status": "success", "data": {"resultType": "vector", "result": [dcgm]}}
    with JsonStandIn(lambda path: answer) as prometheus:
        registry = CollectorRegistry()
        utilisation = DcgmUtilisation(prometheus.url, ttl=3600)
        registry.register(LabCollector(lambda: (NODES, PODS, CATALOG, []), utilisation=utilisation))
        scrape(registry)  # starts the one query; a later scrape has its answer
        deadline = time.monotonic() + 30
        while utilisation.answer.read_at is None and time.monotonic() < deadline:
            time.sleep(0.02)
        exported = {name for name, _ in scrape(registry)}
    assert "jupyterhub_kubelab_gpu_utilisation_percent" in exported
    labels = {"gpu_type", "group", "user", "state"}
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            names = set(re.findall(r"jupyterhub_kubelab_\w+", target["expr"]))
            assert names and names <= exported, target["expr"]
            for by in re.findall(r"by \((\w+)\)", target["expr"]):
                assert by in labels, target["expr"]


def dra_pod(name: str, namespace: str, claims: list[str], uid: str, **labels: str) -> dict[str, Any]:
    """A bound pod claiming through DRA: no GPU resource, only `resourceClaims`."""
    return {
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": labels},
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}],
        },
        "status": {
            "phase": "Running",
            "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": c} for c in claims],
        },
    }


def dra_claim(
    devices: list[str], reserved: list[str], admin: bool = False, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    results = [
        {"driver": "d", "pool": "n1", "device": d, "request": "gpus", "adminAccess": admin} for d in devices
    ]
    return {
        "metadata": {"labels": labels or {}},
        "status": {
            "allocation": {"devices": {"results": results}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": uid} for uid in reserved],
        },
    }


CAROL = {"kubelab.io/user": "carol", "kubelab.io/group": "vision"}


def test_dra_devices_count_for_the_namespace_owner_of_the_pod_their_claim_is_reserved_for() -> None:
    from kubelab.spawner.dra_availability import DraCount
    from kubelab.spawner.dra_usage import DraState

    namespaces = [
        {
            "metadata": {
                "name": name,
                "labels": {"app.kubernetes.io/managed-by": "kubelab", "kubelab.io/user": user},
                "annotations": {"kubelab.io/group": "public"},
            }
        }
        for name, user in (("user-bob", "bob"), ("user-carol", "carol"))
    ]
    claims = {  # labels naming carol move nothing
        "user-bob/nb": dra_claim(["g0"], ["u1", "u2"], labels=CAROL),  # shared by two pods
        "user-bob/loose": dra_claim(["g1"], [], labels=CAROL),  # allocated, reserved for no pod
        "user-bob/others": dra_claim(["g2"], ["u9"]),  # reserved for a pod that does not reference it
        "user-bob/watch": dra_claim(["g3"], ["u1"], admin=True),  # a monitor's access: holds nothing
        "user-carol/nb": dra_claim(["g4"], ["u5"]),
        "user-bob/cpu": dra_claim(["nic0"], ["u1"]),  # a device no catalog type accepts
    }
    pods = [
        dra_pod(
            "jupyter-bob", "user-bob", ["nb", "loose", "watch", "cpu"], "u1", **{"kubelab.io/user": "carol"}
        ),
        dra_pod("helper", "user-bob", ["nb"], "u2"),
        dra_pod("stranger", "user-bob", ["nb"], ""),  # no uid: never the one reserved
        dra_pod("named-like-carols", "user-bob", ["user-carol/nb", "others"], "u3"),
        {**dra_pod("done", "user-carol", ["nb"], "u5"), "status": {"phase": "Succeeded"}},
    ]
    catalog = Catalog.parse({"gpu_types": [{"name": "A100-dra", "device_class": "gpu.example.com"}]})
    devices = {("d", "n1", f"g{i}"): "A100-dra" for i in range(5)}
    state = DraState(claims, devices, {"A100-dra": DraCount(5, 1)})
    assert gpus_allocated([], pods, catalog, namespaces, state) == {("A100-dra", "public", "bob"): 1}
    parsed = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families([], pods, catalog, namespaces, state)
        for s in f.samples
    }
    assert parsed[("jupyterhub_kubelab_gpus_total", (("gpu_type", "A100-dra"),))] == 5
    assert parsed[("jupyterhub_kubelab_gpus_free", (("gpu_type", "A100-dra"),))] == 1
    unknown = [
        f
        for f in families(
            [], pods, catalog, namespaces, DraState(claims, devices, {"A100-dra": DraCount(5, None)})
        )
    ]
    assert [s for f in unknown if f.name == "jupyterhub_kubelab_gpus_free" for s in f.samples] == []
