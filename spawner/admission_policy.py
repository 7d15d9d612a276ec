"""Pure builders for the ValidatingAdmissionPolicies that bound what a user namespace may create.

RBAC says which kinds a notebook's token may create; it cannot look inside them. These policies
(built into the API server since Kubernetes 1.30: CEL, no webhook to run) refuse, whoever asks
(the notebook's token, a Job's controller creating its pods, the hub itself):

- `kubelab-user-pods`: a pod that drops its group's node selector, names its node, tolerates a
  taint outside its allowed keys, or has a generic ephemeral volume over the cap;
- `kubelab-user-cronjobs`: a CronJob that fires more often than once per `schedule_minutes`;
- `kubelab-user-services`: a Service with `externalIPs` (CVE-2020-8554) or of another type than
  ClusterIP;
- `kubelab-user-rolebindings`: a RoleBinding to anyone but the namespace's own ServiceAccounts
  (such as `system:serviceaccounts`, which would hand the namespace and its quota to everyone);
- `kubelab-user-httproutes`: an HTTPRoute attached to anything but a Service of its namespace or
  the lab's Gateway, or attached to the Gateway for a hostname outside `*.<namespace>.<domain>`
  (a path on the hub's hostname would take the hub's requests);
- `kubelab-user-inferenceservices`: a KServe InferenceService not labelled cluster-local (KServe
  would publish it on the cluster's ingress);
- `kubelab-user-resourceclaims`, `kubelab-user-resourceclaimtemplates`: a DRA claim (or claim
  template) naming a DeviceClass outside the catalog's DRA types (`kubelab.io/device-classes`).

The group's values are annotations of the namespace (`kubelab.io/node-selector`, ...), which
the spawner writes with the namespace and the policies read as `namespaceObject`: the notebook's
Role has no right on its namespace, and the values arrive with the label that binds the policies,
so no pod is ever checked against values not yet there. A missing annotation refuses the pod.
The policies are cluster-scoped and the same for every hub; each hub's bindings select the user
namespaces it made by the label `kubelab.io/hub=<hub namespace>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bounds import NamespaceBounds
from .labels import MANAGED_BY

HUB_LABEL = "kubelab.io/hub"
API = "admissionregistration.k8s.io/v1"
# tolerations every pod gets from the API server (DefaultTolerationSeconds)
BUILTIN_TOLERATIONS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


@dataclass(frozen=True)
class Placement:
    """Where one user namespace's pods may go: its hub (whose bindings select it) and its group's
    node selector and toleration keys (the catalog's GPU taints and the admin's own)."""

    hub_namespace: str
    node_selector: dict[str, str]
    toleration_keys: tuple[str, ...]
    gateway: str = ""  # NAMESPACE/NAME of the Gateway services' routes may attach to ('' = none)
    service_domain: str = ""  # a route on the Gateway serves <host>.<namespace>.<service_domain>
    device_classes: tuple[str, ...] = ()  # the DeviceClasses of the catalog's DRA types


def placement(
    hub_namespace: str,
    node_selector: dict[str, str],
    tolerations: list[Any],
    gpu_resources: list[str],
    gateway: str = "",
    service_domain: str = "",
    device_classes: tuple[str, ...] = (),
) -> Placement:
    """A namespace's placement: toleration keys of the catalog's GPU taints and the admin's own
    (`tolerations`), and the GPU resources (kubelab's experiments tolerate them by name)."""
    keys = {t.get("key") or "" for t in tolerations if isinstance(t, dict)} | set(gpu_resources)
    classes = tuple(sorted(set(device_classes)))
    return Placement(
        hub_namespace, dict(node_selector), tuple(sorted(keys - {""})), gateway, service_domain, classes
    )


ANNOTATIONS = {
    "nodeSelector": "kubelab.io/node-selector",
    "tolerationKeys": "kubelab.io/toleration-keys",
    "ephemeralVolume": "kubelab.io/ephemeral-volume",
    "scheduleMinutes": "kubelab.io/schedule-minutes",
    "gateway": "kubelab.io/gateway",
    "serviceDomain": "kubelab.io/service-domain",
    "deviceClasses": "kubelab.io/device-classes",
}


def namespace_annotations(placement: Placement, bounds: NamespaceBounds) -> dict[str, str]:
    """The group's values for the pod and CronJob policies, as strings CEL splits (label keys and
    values hold no `,` or `=`)."""
    keys = {*placement.toleration_keys, *BUILTIN_TOLERATIONS} - {""}
    values = {
        "nodeSelector": ",".join(f"{k}={v}" for k, v in sorted(placement.node_selector.items())),
        "tolerationKeys": ",".join(sorted(keys)),
        "ephemeralVolume": bounds.ephemeral_volume,
        "scheduleMinutes": str(bounds.schedule_minutes),
        "gateway": placement.gateway,
        "serviceDomain": placement.service_domain,
        "deviceClasses": ",".join(placement.device_classes),
    }
    return {ANNOTATIONS[name]: value for name, value in values.items()}


def _from_namespace(*names: str) -> list[dict[str, str]]:
    return [
        {"name": name, "expression": f"namespaceObject.metadata.annotations['{ANNOTATIONS[name]}']"}
        for name in names
    ]


# dyn(): the API server's type checker does not resolve a claim template's `resources` that deep
_EPHEMERAL = "dyn(v.ephemeral.volumeClaimTemplate.spec.resources).requests"
_POD_RULES = [
    (
        "!has(object.spec.nodeName) || object.spec.nodeName == ''",
        "'a pod may not name its node (spec.nodeName); the scheduler places it'",
    ),
    (
        "variables.nodeSelector == '' || variables.nodeSelector.split(',').all(pair, "
        "has(object.spec.nodeSelector) && pair.split('=')[0] in object.spec.nodeSelector && "
        "object.spec.nodeSelector[pair.split('=')[0]] == pair.split('=')[1])",
        "'spec.nodeSelector must keep the group\\'s node selector ' + variables.nodeSelector",
    ),
    (
        "!has(object.spec.tolerations) || object.spec.tolerations.all(t, has(t.key) && t.key != '' "
        "&& t.key in variables.tolerationKeys.split(','))",
        "'spec.tolerations may name only the keys ' + variables.tolerationKeys",
    ),
    (
        "!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.ephemeral) || "
        f"(has({_EPHEMERAL}) && 'storage' in {_EPHEMERAL} && "
        f"quantity(string({_EPHEMERAL}['storage'])).compareTo("
        "quantity(variables.ephemeralVolume)) <= 0))",
        "'each ephemeral volume may ask for at most ' + variables.ephemeralVolume + ' of storage'",
    ),
]
_CRONJOB_RULES = [
    (
        "variables.schedule.startsWith('@') ? !variables.schedule.startsWith('@every') : "
        "(variables.minute.matches('^[0-9]{1,2}(,[0-9]{1,2})*$') && "
        "size(variables.minute.split(',')) * int(variables.scheduleMinutes) <= 60) || "
        "(variables.minute.matches('^([*]|[0-9]{1,2}(-[0-9]{1,2})?)/[0-9]{1,2}$') && "
        "int(variables.minute.split('/')[1]) >= int(variables.scheduleMinutes))",
        "'spec.schedule may fire at most once per ' + variables.scheduleMinutes + "
        "' minutes: its minute field must be N, a list of at most ' + "
        "string(60 / int(variables.scheduleMinutes)) + ' minutes, or */' + "
        "variables.scheduleMinutes + ' or more'",
    ),
]
_SERVICE_RULES = [
    (
        "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
        "'a Service may not set spec.externalIPs (CVE-2020-8554)'",
    ),
    (
        "!has(object.spec.type) || object.spec.type == 'ClusterIP'",
        "'a Service must be of type ClusterIP, not ' + object.spec.type",
    ),
]
_ROLE_BINDING_RULES = [
    (
        "!has(object.subjects) || object.subjects.all(s, s.kind == 'ServiceAccount' && "
        "(!has(s.namespace) || s.namespace == '' || s.namespace == request.namespace))",
        "'a RoleBinding may name only ServiceAccounts of its own namespace ' + request.namespace",
    ),
]


_ROUTE_PARENT = (
    "(p.kind == 'Service' && (!has(p.group) || p.group == '') && "
    "(!has(p.namespace) || p.namespace == request.namespace)) || "
    "(p.kind == 'Gateway' && variables.gateway != '' && "
    "(has(p.namespace) ? p.namespace : request.namespace) + '/' + p.name == variables.gateway)"
)
_HTTP_ROUTE_RULES = [
    (
        f"!has(object.spec.parentRefs) || object.spec.parentRefs.all(p, {_ROUTE_PARENT})",
        "'spec.parentRefs may name Services of namespace ' + request.namespace + "
        "(variables.gateway == '' ? '' : ' and the Gateway ' + variables.gateway)",
    ),
    (
        "!has(object.spec.parentRefs) || !object.spec.parentRefs.exists(p, p.kind == 'Gateway') || "
        "(variables.serviceDomain != '' && has(object.spec.hostnames) && size(object.spec.hostnames) > 0 "
        "&& object.spec.hostnames.all(h, h.endsWith('.' + request.namespace + '.' + "
        "variables.serviceDomain)))",
        "'spec.hostnames of a route on the Gateway must each end in .' + request.namespace + '.' + "
        "variables.serviceDomain",
    ),
]
KSERVE_VISIBILITY = "networking.kserve.io/visibility"
_INFERENCE_SERVICE_RULES = [
    (
        f"has(object.metadata.labels) && '{KSERVE_VISIBILITY}' in object.metadata.labels && "
        f"object.metadata.labels['{KSERVE_VISIBILITY}'] == 'cluster-local'",
        f"'an InferenceService must be labelled {KSERVE_VISIBILITY}: cluster-local'",
    ),
]


@dataclass(frozen=True)
class Policy:
    name: str
    group: str
    resource: str
    operations: tuple[str, ...]
    rules: list[tuple[str, str]]
    variables: tuple[dict[str, str], ...] = ()
    version: str = "v1"


def _claim_rules(devices: str) -> list[tuple[str, str]]:
    """Every request of a claim's `devices` names an allowed DeviceClass (a prioritized list's
    alternatives too); an empty list allows none."""
    allowed = "variables.deviceClasses.split(',')"
    return [
        (
            f"{devices}.requests.all(r, (!has(r.exactly) || r.exactly.deviceClassName in {allowed}) && "
            f"(!has(r.firstAvailable) || r.firstAvailable.all(s, s.deviceClassName in {allowed})))",
            "'a claim may name only the DeviceClasses of the GPU catalog: ' + variables.deviceClasses",
        )
    ]


POLICIES = (
    Policy(
        "kubelab-user-pods",
        "",
        "pods",
        ("CREATE",),
        _POD_RULES,
        tuple(_from_namespace("nodeSelector", "tolerationKeys", "ephemeralVolume")),
    ),
    Policy(
        "kubelab-user-cronjobs",
        "batch",
        "cronjobs",
        ("CREATE", "UPDATE"),
        _CRONJOB_RULES,
        (
            *_from_namespace("scheduleMinutes"),
            {"name": "schedule", "expression": "object.spec.schedule.trim()"},
            {"name": "minute", "expression": "variables.schedule.split(' ')[0]"},
        ),
    ),
    Policy("kubelab-user-services", "", "services", ("CREATE", "UPDATE"), _SERVICE_RULES),
    Policy(
        "kubelab-user-rolebindings",
        "rbac.authorization.k8s.io",
        "rolebindings",
        ("CREATE", "UPDATE"),
        _ROLE_BINDING_RULES,
    ),
    Policy(
        "kubelab-user-httproutes",
        "gateway.networking.k8s.io",
        "httproutes",
        ("CREATE", "UPDATE"),
        _HTTP_ROUTE_RULES,
        tuple(_from_namespace("gateway", "serviceDomain")),
    ),
    Policy(
        "kubelab-user-inferenceservices",
        "serving.kserve.io",
        "inferenceservices",
        ("CREATE", "UPDATE"),
        _INFERENCE_SERVICE_RULES,
        version="v1beta1",
    ),
    Policy(
        "kubelab-user-resourceclaims",
        "resource.k8s.io",
        "resourceclaims",
        ("CREATE",),
        _claim_rules("object.spec.devices"),
        tuple(_from_namespace("deviceClasses")),
    ),
    Policy(
        "kubelab-user-resourceclaimtemplates",
        "resource.k8s.io",
        "resourceclaimtemplates",
        ("CREATE",),
        _claim_rules("object.spec.spec.devices"),
        tuple(_from_namespace("deviceClasses")),
    ),
)


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": dict(MANAGED_BY)}


def policy(policy: Policy) -> dict[str, Any]:
    """One kind's policy; one per kind, so each expression is type-checked against its kind."""
    rule = {
        "apiGroups": [policy.group],
        "apiVersions": [policy.version],
        "operations": list(policy.operations),
        "resources": [policy.resource],
    }
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [rule]},
        "validations": [
            {"expression": expression, "messageExpression": message, "reason": "Forbidden"}
            for expression, message in policy.rules
        ],
    }
    if policy.variables:
        spec["variables"] = [dict(v) for v in policy.variables]
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(policy.name),
        "spec": spec,
    }


def binding(policy: Policy, hub_namespace: str) -> dict[str, Any]:
    """The policy bound to the user namespaces one hub labelled (`kubelab.io/hub`)."""
    spec: dict[str, Any] = {
        "policyName": policy.name,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchLabels": {**MANAGED_BY, HUB_LABEL: hub_namespace}}},
    }
    return {
        "apiVersion": API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": _meta(f"{policy.name}-{hub_namespace}"),
        "spec": spec,
    }


def admission_objects(hub_namespace: str) -> list[dict[str, Any]]:
    """What an admin applies (`kubelab hub render --all`): the policies, then this hub's bindings."""
    return [*(policy(p) for p in POLICIES), *(binding(p, hub_namespace) for p in POLICIES)]
