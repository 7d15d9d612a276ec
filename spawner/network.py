"""Pure builders for the NetworkPolicies of a user's namespace.

z2jh's own NetworkPolicies live in the hub's namespace only, so a notebook in a per-user
namespace would otherwise reach the cloud metadata endpoint and every other user's pods.
Policies are additive allow-lists: the namespace gets a default deny, then one policy per
kind of traffic a notebook or an experiment needs.

Experiments may talk to the experiments of the same namespace (distributed training; the
namespace is one user's), not per run: a per-run policy would be created by the notebook's
account, and an account that may create NetworkPolicies may also allow itself any egress.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, ValidationError

from .labels import MANAGED_BY

METADATA_ENDPOINT = "169.254.169.254/32"
PRIVATE_RANGES = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
LINK_LOCAL = "169.254.0.0/16"
# z2jh's hub and proxy pods carry this label: they are the ones that talk to notebooks.
SINGLEUSER_ACCESS_LABEL = "hub.jupyter.org/network-access-singleuser"
# z2jh's hub policy admits pods with this label (from other namespaces with
# hub.networkPolicy.interNamespaceAccessLabels=accept).
HUB_ACCESS_LABEL = "hub.jupyter.org/network-access-hub"
EXPERIMENT_SELECTOR = {"app.kubernetes.io/name": "kubelab-experiment"}
# the pods of served services (kubelab serve): the backend's serving builders label them so
SERVICE_SELECTOR = {"app.kubernetes.io/name": "kubelab-service"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
POLICY_NAMES = (
    "kubelab-default-deny",
    "kubelab-dns",
    "kubelab-notebook",
    "kubelab-experiments",
    "kubelab-services",
    "kubelab-internet",
)
EXTRA_EGRESS_POLICY = "kubelab-extra-egress"


@dataclass(frozen=True)
class ApiServer:
    """Where the cluster's API server listens, as pods see it after the Service's DNAT
    (the endpoints of `default/kubernetes`, not its ClusterIP)."""

    cidrs: tuple[str, ...]
    ports: tuple[int, ...]

    @classmethod
    def parse(cls, cidrs: list[str], ports: list[int], field_name: str) -> ApiServer:
        problems = []
        for i, cidr in enumerate(cidrs):
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                problems.append(FieldError(f"{field_name}.cidrs[{i}]", f"{cidr!r} is not a CIDR or address"))
        for i, port in enumerate(ports):
            if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                problems.append(FieldError(f"{field_name}.ports[{i}]", f"{port!r} is not a port (1-65535)"))
        if problems:
            raise ValidationError("invalid API server address", problems)
        return cls(tuple(_cidr(c) for c in cidrs), tuple(ports))

    @classmethod
    def from_endpoint_slices(cls, slices: list[dict[str, Any]]) -> ApiServer:
        """The addresses and ports of `default/kubernetes`'s EndpointSlices."""
        cidrs: list[str] = []
        ports: list[int] = []
        for item in slices:
            for endpoint in item.get("endpoints") or []:
                cidrs.extend(_cidr(a) for a in endpoint.get("addresses") or [])
            ports.extend(p["port"] for p in item.get("ports") or [] if p.get("port"))
        if not cidrs or not ports:
            raise ValidationError(
                "API server address unknown",
                [
                    FieldError(
                        "KubeLabSpawner.api_server_cidrs",
                        "default/kubernetes has no endpoints; set api_server_cidrs and api_server_ports",
                    )
                ],
            )
        return cls(tuple(sorted(set(cidrs))), tuple(sorted(set(ports))))


def _cidr(text: str) -> str:
    return str(ipaddress.ip_network(text, strict=False))


@dataclass(frozen=True)
class Isolation:
    """What a user namespace's pods may reach. Built from KubeLabSpawner's settings."""

    hub_namespace: str
    api_server: ApiServer
    notebook_selector: dict[str, str] = field(default_factory=lambda: {"component": "singleuser-server"})
    hub_selector: dict[str, str] = field(default_factory=lambda: {"component": "hub"})
    hub_port: int = 8081
    notebook_port: int = 8888
    internet: bool = True
    extra_egress: tuple[dict[str, Any], ...] = ()  # the lab's own services: a mirror, object storage
    service_ingress: tuple[dict[str, Any], ...] = ()  # who else reaches served services: the ingress


def extra_egress_rules(rules: list[Any], field_name: str) -> tuple[dict[str, Any], ...]:
    """An admin's extra egress rules (NetworkPolicy egress rules, for every pod of a user
    namespace). A rule without `to` and `ports` would open everything: refused by name."""
    problems = []
    for i, rule in enumerate(rules):
        where = f"{field_name}[{i}]"
        if not isinstance(rule, dict):
            problems.append(FieldError(where, "must be a NetworkPolicy egress rule (a mapping)"))
        elif set(rule) - {"to", "ports"}:
            unknown = ", ".join(sorted(set(rule) - {"to", "ports"}))
            problems.append(FieldError(where, f"unknown keys {unknown} (a rule has to, ports)"))
        elif not rule.get("to") and not rule.get("ports"):
            problems.append(
                FieldError(
                    where,
                    "names no destination and no port, so it allows every egress; "
                    "set network_policy = False instead if that is meant",
                )
            )
    if problems:
        raise ValidationError("invalid NetworkPolicy settings", problems)
    return tuple(rules)


PEER_KEYS = {"podSelector", "namespaceSelector", "ipBlock"}


def service_peers(peers: list[Any], field_name: str) -> tuple[dict[str, Any], ...]:
    """The admin's peers that may reach served services (NetworkPolicy `from` entries). An empty
    peer would admit every pod of every namespace: refused by name."""
    problems = []
    for i, peer in enumerate(peers):
        where = f"{field_name}[{i}]"
        if not isinstance(peer, dict) or not peer:
            problems.append(FieldError(where, "must be a NetworkPolicy peer: pods, namespaces or an ipBlock"))
        elif set(peer) - PEER_KEYS:
            unknown = ", ".join(sorted(set(peer) - PEER_KEYS))
            keys = ", ".join(sorted(PEER_KEYS))
            problems.append(FieldError(where, f"unknown keys {unknown} (a peer has {keys})"))
    if problems:
        raise ValidationError("invalid NetworkPolicy settings", problems)
    return tuple(peers)


def _policy(ns: str, name: str, selector: dict[str, str], spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns, "labels": dict(MANAGED_BY)},
        "spec": {"podSelector": {"matchLabels": dict(selector)} if selector else {}, **spec},
    }


def _in_namespace(ns: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: ns}},
        "podSelector": {"matchLabels": dict(selector)},
    }


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": p} for p in ports]


def _api_server_rule(api_server: ApiServer) -> list[dict[str, Any]]:
    """The egress rule to the API server; none without addresses (an empty `to` would allow
    every destination)."""
    if not api_server.cidrs or not api_server.ports:
        return []
    return [{"to": [{"ipBlock": {"cidr": c}} for c in api_server.cidrs], "ports": _tcp(*api_server.ports)}]


def network_policies(ns: str, isolation: Isolation) -> list[dict[str, Any]]:
    """The namespace's policies, in order: deny everything, then allow what is needed."""
    not_private = [*PRIVATE_RANGES, LINK_LOCAL]
    policies = [
        _policy(ns, "kubelab-default-deny", {}, {"policyTypes": ["Ingress", "Egress"]}),
        # cluster DNS: kube-system's pods, or a node-local cache on a link-local address
        # (169.254.20.10), never the metadata endpoint
        _policy(
            ns,
            "kubelab-dns",
            {},
            {
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "kube-system"}}},
                            {"ipBlock": {"cidr": LINK_LOCAL, "except": [METADATA_ENDPOINT]}},
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
        ),
        _policy(
            ns,
            "kubelab-notebook",
            isolation.notebook_selector,
            {
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [
                    {
                        "from": [_in_namespace(isolation.hub_namespace, {SINGLEUSER_ACCESS_LABEL: "true"})],
                        "ports": _tcp(isolation.notebook_port),
                    }
                ],
                "egress": [
                    {
                        "to": [_in_namespace(isolation.hub_namespace, isolation.hub_selector)],
                        "ports": _tcp(isolation.hub_port),
                    },
                    *_api_server_rule(isolation.api_server),
                    {"to": [{"podSelector": {"matchLabels": dict(SERVICE_SELECTOR)}}]},  # its services
                ],
            },
        ),
        _policy(
            ns,
            "kubelab-experiments",
            EXPERIMENT_SELECTOR,
            {
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"from": [{"podSelector": {"matchLabels": dict(EXPERIMENT_SELECTOR)}}]}],
                "egress": [{"to": [{"podSelector": {"matchLabels": dict(EXPERIMENT_SELECTOR)}}]}],
            },
        ),
        # served services: the hub's proxy, the namespace's notebook and the lab's ingress, no one else
        _policy(
            ns,
            "kubelab-services",
            SERVICE_SELECTOR,
            {
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [
                            _in_namespace(isolation.hub_namespace, {SINGLEUSER_ACCESS_LABEL: "true"}),
                            {"podSelector": {"matchLabels": dict(isolation.notebook_selector)}},
                            *(dict(peer) for peer in isolation.service_ingress),
                        ]
                    }
                ],
            },
        ),
    ]
    if isolation.internet:  # public addresses only: package indexes, datasets, git
        policies.append(
            _policy(
                ns,
                "kubelab-internet",
                {},
                {
                    "policyTypes": ["Egress"],
                    "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": not_private}}]}],
                },
            )
        )
    if isolation.extra_egress:
        policies.append(
            _policy(
                ns,
                EXTRA_EGRESS_POLICY,
                {},
                {
                    "policyTypes": ["Egress"],
                    "egress": [dict(rule) for rule in isolation.extra_egress],
                },
            )
        )
    return policies
