"""Traffic between the versions of one service: the weights a user asks for, checked against the
versions that exist, and what carries them on the cluster (pure builders, no API calls).

`kubelab service traffic iris 2=10` gives version 2 ten percent and the one version not named
the rest; `--mirror 2=100` copies every request to version 2 and answers from the others. Two
carriers, found by discovery:

- KServe: one InferenceService whose latest revision gets `canaryTrafficPercent` and whose
  previous rolled-out revision the rest. KServe keeps two revisions live, and cannot mirror.
- The Gateway API: an `HTTPRoute` with one weighted backend per version's Service and a
  `RequestMirror` filter. Its parents are the service's own stable Service (east-west, the
  GAMMA way: in-namespace only) and, when the lab configures one, a shared Gateway.

Without either, the stable Service's selector points at one version: a whole switch (0 or 100)
is all it can do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubelab.errors import FieldError, ValidationError

Manifest = dict[str, Any]
GATEWAY_GROUP = "gateway.networking.k8s.io"
HTTP_ROUTE_VERSION = "v1"
Shares = Sequence[str] | Mapping[str, Any]  # percents per version: ["2=10"] (CLI) or {"2": 10} (REST)


def version_name(service: str, version: str) -> str:
    """The Deployment, Service and HPA of one version of a service."""
    return f"{service}-v{version}"


@dataclass(frozen=True)
class Traffic:
    """Who answers: percent per version (adding up to 100), and which version gets a copy of
    what percent of requests (its answers are dropped)."""

    weights: dict[str, int]
    mirror: dict[str, int] = field(default_factory=dict)

    @property
    def primary(self) -> str:
        """The version with the most traffic (the older one on a tie): where a Service points."""
        return max(self.weights, key=lambda v: (self.weights[v], -list(self.weights).index(v)))


def parse_assignments(values: Shares, where: str) -> dict[str, int]:
    """`["2=10", "1=90"]` (the CLI's) or `{"2": 10, "1": 90}` (a REST body's) as
    `{"2": 10, "1": 90}`; each bad item named as `<where>[i]`, or `<where>.<version>` in a
    mapping. Anything else is refused as `<where>`."""
    if isinstance(values, Mapping):
        return _parse_shares(values, where)
    if isinstance(values, str) or not isinstance(values, Sequence):
        reason = f'must map versions to percents, e.g. {{"2": 10}}, not {type(values).__name__}'
        raise ValidationError(f"invalid {where}", [FieldError(where, reason)])
    parsed: dict[str, int] = {}
    problems = []
    for i, item in enumerate(values):
        version, equals, percent = str(item).partition("=")
        version, percent = version.strip().removeprefix("v"), percent.strip()
        if not equals or not version or not percent.isdigit() or not 0 <= int(percent) <= 100:
            problems.append(FieldError(f"{where}[{i}]", f"{item!r} is not VERSION=PERCENT (0-100)"))
        elif version in parsed:
            problems.append(FieldError(f"{where}[{i}]", f"version {version} is given twice"))
        else:
            parsed[version] = int(percent)
    if problems:
        raise ValidationError(f"invalid {where}", problems)
    return parsed


def _parse_shares(values: Mapping[str, Any], where: str) -> dict[str, int]:
    """`{"2": 10}`: each percent a whole number from 0 to 100 (not `"10"`, `10.5` or `true`)."""
    parsed: dict[str, int] = {}
    problems = []
    for key, percent in values.items():
        version = str(key).strip().removeprefix("v")
        if not version or "=" in version:
            problems.append(FieldError(f"{where}.{key}", "is not a version, e.g. 2"))
        elif isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            reason = f"must be a whole percent from 0 to 100, not {percent!r}"
            problems.append(FieldError(f"{where}.{version}", reason))
        elif version in parsed:
            problems.append(FieldError(f"{where}.{version}", f"version {version} is given twice"))
        else:
            parsed[version] = percent
    if problems:
        raise ValidationError(f"invalid {where}", problems)
    return parsed


def split(
    service: str,
    versions: Sequence[str],
    weights: Mapping[str, int],
    mirror: Mapping[str, int] | None = None,
) -> Traffic:
    """The whole split from what the user named: every named version must exist, the weights
    must add up to 100, or to less with exactly one version left out (it takes the rest)."""
    known = ", ".join(versions) or "none"
    problems = [
        FieldError(f"traffic.{v}", f"service {service} has no version {v} (its versions: {known})")
        for v in weights
        if v not in versions
    ]
    problems += [
        FieldError(f"mirror.{v}", f"service {service} has no version {v} (its versions: {known})")
        for v in mirror or {}
        if v not in versions
    ]
    if problems:
        raise ValidationError("invalid traffic", problems)
    total = sum(weights.values())
    rest = [v for v in versions if v not in weights]
    if total > 100:
        problems.append(FieldError("traffic", f"the weights add up to {total}%, more than 100%"))
    elif not rest and total != 100:
        problems.append(FieldError("traffic", f"the weights add up to {total}%; they must add up to 100%"))
    elif len(rest) > 1 and total != 100:
        left = ", ".join(rest)
        problems.append(FieldError("traffic", f"versions {left} have no weight: name every version but one"))
    if mirror and len(mirror) > 1:
        problems.append(FieldError("mirror", "one version at a time can be mirrored to"))
    for v, percent in (mirror or {}).items():
        if percent < 1:
            problems.append(FieldError(f"mirror.{v}", "must copy 1-100% of requests"))
    if problems:
        raise ValidationError("invalid traffic", problems)
    full = {v: weights.get(v, 100 - total if v in rest else 0) for v in versions}
    return Traffic(full, dict(mirror or {}))


def kserve_canary(traffic: Traffic, previous: str | None, latest: str) -> int:
    """The `canaryTrafficPercent` of an InferenceService whose latest revision is `latest` and
    whose previous rolled-out one is `previous`. KServe serves those two and cannot mirror."""
    if traffic.mirror:
        raise ValidationError(
            "invalid traffic",
            [FieldError("mirror", "KServe's canary rollout cannot mirror requests (the Gateway API can)")],
        )
    live = {previous, latest} - {None}
    others = [v for v, percent in traffic.weights.items() if percent and v not in live]
    if others:
        raise ValidationError(
            "invalid traffic",
            [
                FieldError(
                    f"traffic.{others[0]}",
                    f"KServe serves only versions {' and '.join(sorted(str(v) for v in live))} "
                    "(the previous and the latest); roll this version out again to serve it",
                )
            ],
        )
    return traffic.weights.get(latest, 0)


@dataclass(frozen=True)
class Gateway:
    """A shared Gateway the lab's admin set up (`KUBELAB_GATEWAY=namespace/name`); its
    `allowedRoutes` decides whether a user namespace's routes attach."""

    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str | None, where: str = "KUBELAB_GATEWAY") -> Gateway | None:
        if not text:
            return None
        namespace, slash, name = text.partition("/")
        if not slash or not namespace or not name:
            raise ValidationError(
                "invalid gateway", [FieldError(where, f"{text!r} is not NAMESPACE/NAME of a Gateway")]
            )
        return cls(namespace, name)


def http_route(
    service: str,
    namespace: str,
    port: int,
    traffic: Traffic,
    labels: Mapping[str, str],
    gateway: Gateway | None = None,
) -> Manifest:
    """The HTTPRoute that splits `service`'s requests between its versions' Services."""
    parents: list[dict[str, Any]] = [{"group": "", "kind": "Service", "name": service, "port": port}]
    if gateway is not None:
        parents.append({"group": GATEWAY_GROUP, "kind": "Gateway", **vars(gateway)})
    rule: dict[str, Any] = {
        "backendRefs": [
            {"name": version_name(service, v), "port": port, "weight": percent}
            for v, percent in traffic.weights.items()
        ]
    }
    if traffic.mirror:
        ((version, percent),) = traffic.mirror.items()
        rule["filters"] = [
            {
                "type": "RequestMirror",
                "requestMirror": {
                    "backendRef": {"name": version_name(service, version), "port": port},
                    "percent": percent,
                },
            }
        ]
    return {
        "apiVersion": f"{GATEWAY_GROUP}/{HTTP_ROUTE_VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": service, "namespace": namespace, "labels": dict(labels)},
        "spec": {"parentRefs": parents, "rules": [rule]},
    }


def route_traffic(route: Manifest, service: str) -> Traffic:
    """The split an HTTPRoute carries, read back (what `kubelab service show` reports)."""
    prefix = f"{service}-v"
    (rule,) = route["spec"]["rules"]
    weights = {ref["name"].removeprefix(prefix): int(ref.get("weight", 1)) for ref in rule["backendRefs"]}
    mirrors = [f["requestMirror"] for f in rule.get("filters") or [] if f.get("type") == "RequestMirror"]
    mirror = {m["backendRef"]["name"].removeprefix(prefix): int(m.get("percent", 100)) for m in mirrors}
    return Traffic(weights, mirror)
