"""Semantic checks the API server makes beyond the OpenAPI schema (names, labels, pods, jobs...).

Messages follow k8s.io/apimachinery's validation helpers so clients see familiar text.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from .errors import cause

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + r")*"
_DNS1035 = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_QNAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_CONFIG_KEY = r"[-._a-zA-Z0-9]+"

MSG_LABEL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
             "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
             f"'123-abc', regex used for validation is '{_LABEL}')")
MSG_SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                 "characters, '-' or '.', and must start and end with an alphanumeric character "
                 f"(e.g. 'example.com', regex used for validation is '{_SUBDOMAIN}')")
MSG_DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
               "start with an alphabetic character, and end with an alphanumeric character "
               f"(e.g. 'my-name',  or 'abc-123', regex used for validation is '{_DNS1035}')")
MSG_QNAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
             "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
             f"'123-abc', regex used for validation is '{_QNAME}')")
MSG_LABEL_VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                   f"'{_LABEL_VALUE}')")
MSG_CONFIG_KEY = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                  "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation "
                  f"is '{_CONFIG_KEY}')")
COMPUTE_RESOURCES = ("cpu", "memory", "ephemeral-storage")

Causes = list[dict[str, str]]


def _bad(field: str, value: Any, detail: str) -> dict[str, str]:
    return cause(field, "FieldValueInvalid", f"Invalid value: {json.dumps(value)}: {detail}")


def _required(field: str, detail: str = "") -> dict[str, str]:
    return cause(field, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def dns_label(field: str, value: str, pattern: str = _LABEL, msg: str = MSG_LABEL) -> Causes:
    out = []
    if len(value) > 63:
        out.append(_bad(field, value, "must be no more than 63 characters"))
    if not re.fullmatch(pattern, value):
        out.append(_bad(field, value, msg))
    return out


def dns_subdomain(field: str, value: str) -> Causes:
    out = []
    if len(value) > 253:
        out.append(_bad(field, value, "must be no more than 253 characters"))
    if not re.fullmatch(_SUBDOMAIN, value):
        out.append(_bad(field, value, MSG_SUBDOMAIN))
    return out


def qualified_name(field: str, value: str) -> Causes:
    prefix, _, name = value.rpartition("/")
    out = []
    if prefix and (len(prefix) > 253 or not re.fullmatch(_SUBDOMAIN, prefix)):
        out.append(_bad(field, value, "prefix part " + MSG_SUBDOMAIN))
    if not name:
        out.append(_bad(field, value, "name part must be non-empty"))
    elif len(name) > 63:
        out.append(_bad(field, value, "name part must be no more than 63 characters"))
    elif not re.fullmatch(_QNAME, name):
        out.append(_bad(field, value, MSG_QNAME))
    return out


def _name_rule(kind: str) -> Any:
    if kind == "Namespace":
        return dns_label
    if kind == "Service":
        return lambda f, v: dns_label(f, v, _DNS1035, MSG_DNS1035)
    if kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
        return _path_segment
    return dns_subdomain


def _path_segment(field: str, value: str) -> Causes:
    if value in (".", "..") or "/" in value or "%" in value:
        return [_bad(field, value, "may not contain '/' or '%' and may not be '.' or '..'")]
    return []


def metadata(obj: dict[str, Any]) -> Causes:
    meta = obj.get("metadata") or {}
    out: Causes = []
    name = meta.get("name")
    if not name:
        out.append(_required("metadata.name", "name or generateName is required"))
    else:
        out += _name_rule(obj.get("kind", ""))("metadata.name", name)
    out += labels("metadata.labels", meta.get("labels"))
    for key in meta.get("annotations") or {}:
        out += qualified_name("metadata.annotations", key)
    return out


def labels(field: str, values: dict[str, Any] | None) -> Causes:
    out: Causes = []
    for key, value in (values or {}).items():
        out += qualified_name(field, key)
        value = value or ""
        if len(value) > 63:
            out.append(_bad(field, value, "must be no more than 63 characters"))
        elif not re.fullmatch(_LABEL_VALUE, value):
            out.append(_bad(field, value, MSG_LABEL_VALUE))
    return out


def quantity(field: str, value: Any) -> tuple[Decimal | None, Causes]:
    try:
        parsed = parse_quantity(value)
    except (ValueError, TypeError):
        return None, [_bad(field, value, "quantities must match the regular expression "
                                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    if parsed < 0:
        return None, [_bad(field, value, "must be greater than or equal to 0")]
    return parsed, []


def is_extended(resource: str) -> bool:
    """Extended resources (e.g. `nvidia.com/gpu`) are domain-qualified, not kubernetes.io."""
    return "/" in resource and not resource.split("/")[0].endswith("kubernetes.io")


def resources(field: str, spec: dict[str, Any] | None) -> Causes:
    spec = spec or {}
    out: Causes = []
    parsed: dict[str, dict[str, Decimal]] = {"limits": {}, "requests": {}}
    for section in ("limits", "requests"):
        for name, raw in (spec.get(section) or {}).items():
            where = f"{field}.{section}[{name}]"
            if name not in COMPUTE_RESOURCES and not name.startswith("hugepages-") and not (
                    is_extended(name)):
                out.append(_bad(where, name, "must be a standard resource type or fully "
                                             "qualified"))
                continue
            value, errs = quantity(where, raw)
            out += errs
            if value is not None:
                parsed[section][name] = value
                if is_extended(name) and value != value.to_integral_value():
                    out.append(_bad(where, raw, "must be an integer"))
    limits, requests = parsed["limits"], parsed["requests"]
    for name, req in requests.items():
        if is_extended(name):
            if name not in limits:
                out.append(_required(f"{field}.limits",
                                     "Limit must be set for non overcommitable resources"))
            elif limits[name] != req:
                out.append(_bad(f"{field}.requests[{name}]", spec["requests"][name],
                                f"must be equal to {name} limit of {spec['limits'][name]}"))
        elif name in limits and req > limits[name]:
            out.append(_bad(f"{field}.requests", spec["requests"][name],
                            f"must be less than or equal to {name} limit of "
                            f"{spec['limits'][name]}"))
    return out


def pod_spec(field: str, spec: dict[str, Any] | None, restart_policies: tuple[str, ...] = (
        "Always", "OnFailure", "Never")) -> Causes:
    spec = spec or {}
    out: Causes = []
    volumes = set()
    for i, vol in enumerate(spec.get("volumes") or []):
        name = vol.get("name", "")
        if name in volumes:
            out.append(cause(f"{field}.volumes[{i}].name", "FieldValueDuplicate",
                             f"Duplicate value: {json.dumps(name)}"))
        volumes.add(name)
    if not spec.get("containers"):
        out.append(_required(f"{field}.containers"))
    names: set[str] = set()
    for section in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(section) or []):
            where = f"{field}.{section}[{i}]"
            name = ctr.get("name") or ""
            out += dns_label(f"{where}.name", name)
            if name in names:
                out.append(cause(f"{where}.name", "FieldValueDuplicate",
                                 f"Duplicate value: {json.dumps(name)}"))
            names.add(name)
            if not ctr.get("image"):
                out.append(_required(f"{where}.image"))
            out += resources(f"{where}.resources", ctr.get("resources"))
            for j, mount in enumerate(ctr.get("volumeMounts") or []):
                if mount.get("name") not in volumes:
                    out.append(cause(f"{where}.volumeMounts[{j}].name", "FieldValueNotFound",
                                     f"Not found: {json.dumps(mount.get('name'))}"))
            for j, port in enumerate(ctr.get("ports") or []):
                number = port.get("containerPort")
                if isinstance(number, int) and not 0 < number < 65536:
                    out.append(_bad(f"{where}.ports[{j}].containerPort", number,
                                    "must be between 1 and 65535, inclusive"))
    policy = spec.get("restartPolicy")
    if policy is None and "Always" not in restart_policies:
        out.append(_required(f"{field}.restartPolicy", "valid values: "
                             + ", ".join(f'"{p}"' for p in restart_policies)))
    elif policy is not None and policy not in restart_policies:
        out.append(cause(f"{field}.restartPolicy", "FieldValueNotSupported",
                         f"Unsupported value: {json.dumps(policy)}: supported values: "
                         + ", ".join(f'"{p}"' for p in restart_policies)))
    for key in ("hostname", "subdomain"):
        if spec.get(key):
            out += dns_label(f"{field}.{key}", spec[key])
    return out


def _non_negative(field: str, value: Any) -> Causes:
    if isinstance(value, int) and value < 0:
        return [_bad(field, value, "must be greater than or equal to 0")]
    return []


def job(obj: dict[str, Any]) -> Causes:
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    out = pod_spec("spec.template.spec", template.get("spec"), ("OnFailure", "Never"))
    out += labels("spec.template.metadata.labels", (template.get("metadata") or {}).get("labels"))
    for key in ("parallelism", "completions", "backoffLimit"):
        out += _non_negative(f"spec.{key}", spec.get(key))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= 0:
        out.append(_bad("spec.activeDeadlineSeconds", deadline, "must be greater than 0"))
    mode = spec.get("completionMode") or "NonIndexed"
    if mode not in ("NonIndexed", "Indexed"):
        out.append(cause("spec.completionMode", "FieldValueNotSupported",
                         f'Unsupported value: {json.dumps(mode)}: supported values: '
                         '"NonIndexed", "Indexed"'))
    if mode == "Indexed" and spec.get("completions") is None:
        out.append(_required("spec.completions", "when completion mode is Indexed"))
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    if any(template_labels.get(k) != v for k, v in selector.items()):
        out.append(_bad("spec.template.metadata.labels", template_labels,
                        "`selector` does not match template `labels`"))
    return out


def replica_templates(obj: dict[str, Any]) -> Causes:
    out: Causes = []
    for key, replicas in (obj.get("spec") or {}).items():
        if key.endswith("ReplicaSpecs") and isinstance(replicas, dict):
            for role, rs in replicas.items():
                template = (rs or {}).get("template") or {}
                out += pod_spec(f"spec.{key}[{role}].template.spec", template.get("spec"))
    return out


def service(obj: dict[str, Any]) -> Causes:
    spec = obj.get("spec") or {}
    ports = spec.get("ports") or []
    out: Causes = []
    if not ports and spec.get("clusterIP") != "None" and spec.get("type") != "ExternalName":
        out.append(_required("spec.ports"))
    for i, port in enumerate(ports):
        if len(ports) > 1 and not port.get("name"):
            out.append(_required(f"spec.ports[{i}].name"))
        number = port.get("port")
        if not isinstance(number, int) or not 0 < number < 65536:
            out.append(_bad(f"spec.ports[{i}].port", number,
                            "must be between 1 and 65535, inclusive"))
    return out


def binding(obj: dict[str, Any]) -> Causes:
    ref = obj.get("roleRef") or {}
    kinds = ("ClusterRole",) if obj["kind"] == "ClusterRoleBinding" else ("Role", "ClusterRole")
    out: Causes = []
    if ref.get("kind") not in kinds:
        out.append(cause("roleRef.kind", "FieldValueNotSupported",
                         f"Unsupported value: {json.dumps(ref.get('kind'))}: supported values: "
                         + ", ".join(f'"{k}"' for k in kinds)))
    if ref.get("apiGroup") != "rbac.authorization.k8s.io":
        out.append(cause("roleRef.apiGroup", "FieldValueNotSupported",
                         f"Unsupported value: {json.dumps(ref.get('apiGroup'))}: supported "
                         'values: "rbac.authorization.k8s.io"'))
    if not ref.get("name"):
        out.append(_required("roleRef.name"))
    for i, subject in enumerate(obj.get("subjects") or []):
        kind = subject.get("kind")
        if kind not in ("ServiceAccount", "User", "Group"):
            out.append(cause(f"subjects[{i}].kind", "FieldValueNotSupported",
                             f"Unsupported value: {json.dumps(kind)}: supported values: "
                             '"ServiceAccount", "User", "Group"'))
        if kind == "ServiceAccount" and not subject.get("namespace") and (
                obj["kind"] == "ClusterRoleBinding"):
            out.append(_required(f"subjects[{i}].namespace"))
    return out


def config_data(obj: dict[str, Any]) -> Causes:
    out: Causes = []
    for section in ("data", "stringData", "binaryData"):
        for key, value in (obj.get(section) or {}).items():
            if not re.fullmatch(_CONFIG_KEY, key):
                out.append(_bad(f"{section}[{key}]", key, MSG_CONFIG_KEY))
            if obj["kind"] == "Secret" and section == "data":
                try:
                    base64.b64decode(value or "", validate=True)
                except (binascii.Error, ValueError):
                    out.append(_bad(f"data[{key}]", "<secret>", "illegal base64 data"))
    return out


def quota(obj: dict[str, Any]) -> Causes:
    out: Causes = []
    for name, value in ((obj.get("spec") or {}).get("hard") or {}).items():
        out += quantity(f"spec.hard[{name}]", value)[1]
    return out


def pvc(obj: dict[str, Any]) -> Causes:
    spec = obj.get("spec") or {}
    out: Causes = []
    if not spec.get("accessModes"):
        out.append(_required("spec.accessModes", "at least 1 access mode is required"))
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        out.append(_required("spec.resources[storage]"))
    else:
        out += quantity("spec.resources[storage]", storage)[1]
    return out


_BY_KIND = {
    "Pod": lambda o: pod_spec("spec", o.get("spec")),
    "Job": job,
    "PyTorchJob": replica_templates,
    "TFJob": replica_templates,
    "Service": service,
    "RoleBinding": binding,
    "ClusterRoleBinding": binding,
    "Secret": config_data,
    "ConfigMap": config_data,
    "ResourceQuota": quota,
    "PersistentVolumeClaim": pvc,
}


def check(obj: dict[str, Any]) -> Causes:
    """All semantic problems of `obj` (empty when it is acceptable)."""
    out = metadata(obj)
    extra = _BY_KIND.get(obj.get("kind", ""))
    if extra is not None:
        out += extra(obj)
    return out
