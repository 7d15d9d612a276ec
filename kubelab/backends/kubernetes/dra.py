"""GPUs claimed through Dynamic Resource Allocation (resource.k8s.io/v1), as pure builders.

A catalog type with `sharing: dra` names a DeviceClass (and optionally a CEL selector, e.g. a
MIG profile or a GPU model attribute). A run of that type gets a ResourceClaimTemplate; each of
its pods names it in `resourceClaims` and its container in `resources.claims`, instead of a
`nvidia.com/gpu` limit. The resourceclaim controller makes one claim per pod from the template,
and the scheduler allocates devices from the drivers' ResourceSlices and binds the pod to their
node. The template is owned by the run's main object, so the garbage collector removes it with
the run; the namespace's quota on `<class>.deviceclass.resource.k8s.io/devices` bounds the
devices claimed, whoever (the controller included) creates the claims.
"""

from __future__ import annotations

from typing import Any

from kubelab.backends.kubernetes.gpu_request import DraRequest

Manifest = dict[str, Any]
API_VERSION = "resource.k8s.io/v1"
CLAIM = "gpus"  # the claim's name inside the pod, and its one request's name
MAIN_KINDS = ("Job", "PyTorchJob", "TFJob")


def quota_key(device_class: str) -> str:
    """The ResourceQuota key counting devices claimed of `device_class`."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def claim_template(request: DraRequest, name: str, labels: dict[str, str]) -> Manifest:
    """The ResourceClaimTemplate a run's pods claim their GPUs from: exactly `count` devices."""
    exactly: Manifest = {
        "deviceClassName": request.device_class,
        "allocationMode": "ExactCount",
        "count": request.count,
    }
    if request.selector:
        exactly["selectors"] = [{"cel": {"expression": request.selector}}]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"spec": {"devices": {"requests": [{"name": CLAIM, "exactly": exactly}]}}},
    }


def attach(pod: Manifest, template: str) -> None:
    """Make `pod` (a pod spec) claim its GPUs from `template`, in every container."""
    pod["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": template}]
    for container in pod["containers"]:
        container.setdefault("resources", {})["claims"] = [{"name": CLAIM}]


def owned(obj: Manifest, created: list[Manifest]) -> Manifest:
    """`obj` owned by the run's main object if it is a claim template (created after it), so
    deleting the run deletes the template; anything else unchanged."""
    main = next((o for o in created if o.get("kind") in MAIN_KINDS), None)
    if obj.get("kind") != "ResourceClaimTemplate" or main is None:
        return obj
    meta = main["metadata"]
    reference = {
        "apiVersion": main.get("apiVersion") or "batch/v1",
        "kind": main["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    return {**obj, "metadata": {**obj["metadata"], "ownerReferences": [reference]}}
