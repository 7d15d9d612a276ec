"""A notebook server of a DRA GPU type: a ResourceClaimTemplate in the user's namespace, and
the pod claiming from it, as Kubernetes intends (`resourceClaims` with
`resourceClaimTemplateName`): the resourceclaim controller makes the pod's claim, owned by the
pod, so the claim and its devices go when the server's pod does, and the scheduler allocates
devices from the drivers' ResourceSlices and binds the pod to their node.

The template is rendered per user and choice (type and count, named with a digest of what it
asks, so a changed catalog never alters one a running pod claims from) and kept for the next
spawn. Before the pod exists the spawner asks the API server to dry-run a claim of the same
spec: the namespace's quota on the class's devices and the admission policy on DeviceClasses
refuse it then, in their own words, where the controller's refusal would only leave the pod
Pending.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from typing import Any

from kubernetes_asyncio.client.rest import ApiException

from kubelab.backends.kubernetes import dra
from kubelab.backends.kubernetes.gpu_request import DraRequest

from .apply import Applier, api_message, path
from .labels import MANAGED_BY

QUOTA_SETTLING = 15.0  # seconds a new namespace's quota may take to be counted


def template_name(gpu_type: Any, count: int) -> str:
    """`kubelab-gpus-<type>-<count>-<digest of class and selector>`, a DNS name."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu_type.name.lower()).strip("-")[:30] or "gpu"
    asked = json.dumps([gpu_type.device_class, gpu_type.selector, count])
    return f"kubelab-gpus-{slug}-{count}-{hashlib.sha256(asked.encode()).hexdigest()[:8]}"


def notebook_template(namespace: str, gpu_type: Any, count: int) -> dict[str, Any]:
    """The template a notebook of `count` devices of the DRA `gpu_type` claims from."""
    request = DraRequest(gpu_type.device_class, count, gpu_type.selector)
    template = dra.claim_template(request, template_name(gpu_type, count), dict(MANAGED_BY))
    template["metadata"]["namespace"] = namespace
    return template


def attach(pod: Any, template: str) -> Any:
    """KubeSpawner's pod (a client model) claiming its GPUs from `template` in its notebook container."""
    from kubernetes_asyncio.client import CoreV1ResourceClaim, V1PodResourceClaim, V1ResourceRequirements

    pod.spec.resource_claims = [V1PodResourceClaim(name=dra.CLAIM, resource_claim_template_name=template)]
    for container in pod.spec.containers:
        if container.name == "notebook":
            container.resources = container.resources or V1ResourceRequirements()
            container.resources.claims = [CoreV1ResourceClaim(name=dra.CLAIM)]
    return pod


async def prepare(applier: Applier, template: dict[str, Any]) -> None:
    """Apply the template, then dry-run the claim the controller will make of it: an
    ApiException carries the quota's or the policy's refusal."""
    await applier.apply(template)
    meta = template["metadata"]
    claim = {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"]},
        "spec": template["spec"]["spec"],
    }
    deadline = time.monotonic() + QUOTA_SETTLING
    while True:
        try:
            await applier.request(
                "POST", path("ResourceClaim", meta["namespace"]), claim, [("dryRun", "All")]
            )
            return
        except ApiException as exc:  # a quota just made is refused until its controller counts it
            if "status unknown for quota" not in api_message(exc) or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)
