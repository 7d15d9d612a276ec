"""The NetworkPolicies of a user namespace (pure builders), read with NetworkPolicy's semantics.

`allowed` below evaluates a set of policies the way the Kubernetes documentation defines them
(a pod selected by any policy of a direction is isolated in it; then a connection is allowed
if any rule of a selecting policy admits the peer and the port). The cluster tests check the
API server accepts them; no CNI runs there, so what they let through is checked here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubelab.errors import ValidationError
from kubelab.spawner.network import (
    METADATA_ENDPOINT,
    POLICY_NAMES,
    ApiServer,
    Isolation,
    network_policies,
)

API = ApiServer(("10.0.0.1/32",), (6443,))
NOTEBOOK = {"component": "singleuser-server", "app": "jupyterhub"}
EXPERIMENT = {"app.kubernetes.io/name": "kubelab-experiment", "kubelab.io/experiment": "r1"}


@dataclass
class Pod:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    ip: str = "10.244.1.7"


@dataclass
class Host:
    """An address outside any pod (the metadata endpoint, the API server, the internet)."""

    ip: str
    namespace: None = None
    labels: None = None


def _matches(selector: dict[str, Any], labels: dict[str, Any] | None) -> bool:
    return labels is not None and all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_admits(peer: dict[str, Any], other: Pod | Host, own_namespace: str) -> bool:
    if "ipBlock" in peer:
        address = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return address in ipaddress.ip_network(block["cidr"]) and not any(
            address in ipaddress.ip_network(c) for c in block.get("except", [])
        )
    if other.namespace is None:  # selectors match pods only
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": other.namespace}
        if not _matches(peer["namespaceSelector"], ns_labels):
            return False
    elif other.namespace != own_namespace:
        return False
    return "podSelector" not in peer or _matches(peer["podSelector"], other.labels)


def _port_admits(rule: dict[str, Any], port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(p["port"] == port and p.get("protocol", "TCP") == protocol for p in ports)


def allowed(
    policies: list[dict[str, Any]], source: Pod | Host, dest: Pod | Host, port: int, protocol: str = "TCP"
) -> bool:
    """Would the policies (all of the namespace of `source` or `dest`) admit this connection?"""

    def side(pod: Pod | Host, direction: str, other: Pod | Host) -> bool:
        if pod.namespace is None:
            return True
        key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
        selecting = [
            p
            for p in policies
            if p["metadata"]["namespace"] == pod.namespace
            and direction in p["spec"]["policyTypes"]
            and _matches(p["spec"]["podSelector"], pod.labels)
        ]
        if not selecting:
            return True
        return any(
            _port_admits(rule, port, protocol)
            and (
                "to" not in rule
                and "from" not in rule
                or any(_peer_admits(peer, other, pod.namespace) for peer in rule[peers_key])
            )
            for policy in selecting
            for rule in policy["spec"].get(key, [])
        )

    return side(source, "Egress", dest) and side(dest, "Ingress", source)


def policies_for(ns: str, **overrides: Any) -> list[dict[str, Any]]:
    return network_policies(ns, Isolation(hub_namespace="jhub", api_server=API, **overrides))


HUB = Pod("jhub", {"component": "hub", "hub.jupyter.org/network-access-singleuser": "true"}, "10.244.0.5")
PROXY = Pod("jhub", {"component": "proxy", "hub.jupyter.org/network-access-singleuser": "true"}, "10.244.0.6")
DNS = Pod("kube-system", {"k8s-app": "kube-dns"}, "10.244.0.2")


def test_names_and_order() -> None:
    assert [p["metadata"]["name"] for p in policies_for("u-alice")] == list(POLICY_NAMES)
    assert [p["metadata"]["name"] for p in policies_for("u-alice", internet=False)] == list(POLICY_NAMES[:-1])
    for policy in policies_for("u-alice"):
        assert policy["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kubelab"}
        assert policy["metadata"]["namespace"] == "u-alice"


def test_notebooks_take_connections_from_the_hub_and_proxy_only() -> None:
    policies = policies_for("u-alice") + policies_for("u-bob")
    notebook = Pod("u-alice", NOTEBOOK)
    assert allowed(policies, HUB, notebook, 8888)
    assert allowed(policies, PROXY, notebook, 8888)
    assert not allowed(policies, HUB, notebook, 22)
    assert not allowed(policies, Pod("u-bob", NOTEBOOK), notebook, 8888)
    assert not allowed(policies, Pod("u-bob", EXPERIMENT), notebook, 8888)
    assert not allowed(policies, Pod("jhub", {"component": "other"}), notebook, 8888)
    assert not allowed(policies, Pod("u-alice", EXPERIMENT), notebook, 8888)


def test_notebooks_reach_dns_the_hub_api_and_the_api_server() -> None:
    policies = policies_for("u-alice")
    notebook = Pod("u-alice", NOTEBOOK)
    assert allowed(policies, notebook, DNS, 53, "UDP")
    assert allowed(policies, notebook, DNS, 53, "TCP")
    assert allowed(policies, notebook, Host("169.254.20.10"), 53, "UDP")  # node-local DNS cache
    assert allowed(policies, notebook, HUB, 8081)
    assert not allowed(policies, notebook, PROXY, 8081)
    assert allowed(policies, notebook, Host("10.0.0.1"), 6443)
    assert not allowed(policies, notebook, Host("10.0.0.2"), 6443)
    assert allowed(policies, notebook, Host("151.101.0.223"), 443)  # the internet (PyPI)
    assert not allowed(policies_for("u-alice", internet=False), notebook, Host("151.101.0.223"), 443)


@pytest.mark.parametrize("labels", [NOTEBOOK, EXPERIMENT, {}])
@pytest.mark.parametrize("internet", [True, False])
def test_nothing_reaches_the_metadata_endpoint_or_other_users(labels: dict[str, Any], internet: bool) -> None:
    policies = policies_for("u-alice", internet=internet) + policies_for("u-bob", internet=internet)
    pod = Pod("u-alice", labels)
    metadata = Host(METADATA_ENDPOINT.split("/")[0])
    for port, protocol in ((80, "TCP"), (53, "UDP"), (53, "TCP"), (443, "TCP")):
        assert not allowed(policies, pod, metadata, port, protocol)
        for other in (
            Pod("u-bob", NOTEBOOK, "10.244.2.9"),
            Pod("u-bob", EXPERIMENT, "10.244.2.10"),
            Pod("u-bob", {}, "10.244.2.11"),
        ):
            assert not allowed(policies, pod, other, port, protocol)
            assert not allowed(policies, other, pod, port, protocol)


def test_experiments_talk_to_experiments_of_the_namespace_and_nothing_in_the_cluster_else() -> None:
    policies = policies_for("u-alice")
    worker0 = Pod("u-alice", EXPERIMENT, "10.244.1.20")
    worker1 = Pod("u-alice", {**EXPERIMENT, "batch.kubernetes.io/job-completion-index": "1"}, "10.244.1.21")
    assert allowed(policies, worker0, worker1, 29500)
    assert allowed(policies, worker1, worker0, 29500)
    assert allowed(policies, worker0, DNS, 53, "UDP")
    assert not allowed(policies, worker0, HUB, 8081)
    assert not allowed(policies, worker0, Host("10.0.0.1"), 6443)  # experiments need no API server
    assert not allowed(policies, worker0, Pod("u-alice", NOTEBOOK), 8888)
    assert not allowed(policies, HUB, worker0, 29500)


def test_without_api_server_addresses_the_rule_is_left_out_not_opened() -> None:
    policies = network_policies("u-alice", Isolation(hub_namespace="jhub", api_server=ApiServer((), ())))
    notebook = next(p for p in policies if p["metadata"]["name"] == "kubelab-notebook")
    assert all(rule.get("to") for rule in notebook["spec"]["egress"])  # never an empty `to`
    assert not allowed(policies, Pod("u-alice", NOTEBOOK), Host("10.0.0.1"), 6443)


def test_api_server_from_endpoint_slices_and_from_settings() -> None:
    slices = [
        {
            "endpoints": [{"addresses": ["172.18.0.3"]}, {"addresses": ["172.18.0.4"]}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
        }
    ]
    assert ApiServer.from_endpoint_slices(slices) == ApiServer(("172.18.0.3/32", "172.18.0.4/32"), (6443,))
    with pytest.raises(ValidationError) as refused:
        ApiServer.from_endpoint_slices([])
    assert refused.value.fields[0].path == "KubeLabSpawner.api_server_cidrs"
    assert ApiServer.parse(["10.0.0.1", "10.1.0.0/16"], [443], "x") == ApiServer(
        ("10.0.0.1/32", "10.1.0.0/16"), (443,)
    )
    with pytest.raises(ValidationError) as refused:
        ApiServer.parse(["10.0.0.300"], [0], "KubeLabSpawner.api_server")
    assert [e.path for e in refused.value.fields] == [
        "KubeLabSpawner.api_server.cidrs[0]",
        "KubeLabSpawner.api_server.ports[0]",
    ]


def test_extra_egress_for_the_labs_own_services() -> None:
    from kubelab.spawner.network import extra_egress_rules

    mirror = {"to": [{"ipBlock": {"cidr": "10.20.0.5/32"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    rules = extra_egress_rules([mirror], "KubeLabSpawner.network_policy_extra_egress")
    policies = network_policies(
        "u-alice", Isolation(hub_namespace="jhub", api_server=API, extra_egress=rules)
    )
    assert policies[-1]["metadata"]["name"] == "kubelab-extra-egress"
    for labels in (NOTEBOOK, EXPERIMENT):
        assert allowed(policies, Pod("u-alice", labels), Host("10.20.0.5"), 443)
        assert not allowed(policies, Pod("u-alice", labels), Host("10.20.0.6"), 443)
    with pytest.raises(ValidationError) as refused:
        extra_egress_rules([{}, "x", {"to": [], "port": 1}], "KubeLabSpawner.network_policy_extra_egress")
    assert [str(f) for f in refused.value.fields] == [
        "KubeLabSpawner.network_policy_extra_egress[0]: names no destination and no port, so it allows every "
        "egress; set network_policy = False instead if that is meant",
        "KubeLabSpawner.network_policy_extra_egress[1]: must be a NetworkPolicy egress rule (a mapping)",
        "KubeLabSpawner.network_policy_extra_egress[2]: unknown keys port (a rule has to, ports)",
    ]


def test_served_services_take_connections_from_the_proxy_their_notebook_and_the_labs_ingress_only() -> None:
    from kubelab.spawner.network import service_peers

    gateway = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateways"}}}
    ingress = service_peers([gateway], "KubeLabSpawner.service_ingress")
    policies = policies_for("u-alice", service_ingress=ingress) + policies_for("u-bob")
    served = Pod("u-alice", {"app.kubernetes.io/name": "kubelab-service", "kubelab.io/service": "iris"})
    assert allowed(policies, PROXY, served, 8080)
    assert allowed(policies, Pod("u-alice", NOTEBOOK), served, 8080)
    assert allowed(policies, Pod("gateways", {"app": "envoy"}), served, 8080)
    assert not allowed(policies, Pod("u-bob", NOTEBOOK), served, 8080)
    assert not allowed(policies, Pod("u-alice", EXPERIMENT), served, 8080)
    assert not allowed(policies, Pod("other", {"app": "x"}), served, 8080)
    assert not allowed(policies_for("u-bob"), Pod("u-alice", NOTEBOOK), Pod("u-bob", served.labels), 8080)
    with pytest.raises(ValidationError) as refused:
        service_peers([{}, {"pods": {}}], "KubeLabSpawner.service_ingress")
    assert [f.path for f in refused.value.fields] == [
        "KubeLabSpawner.service_ingress[0]",
        "KubeLabSpawner.service_ingress[1]",
    ]
