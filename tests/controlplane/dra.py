"""Playing a DRA driver and a cluster admin on the control plane: a DeviceClass of a driver, and
the ResourceSlice the driver publishes for a KWOK node. The resourceclaim controller and the
scheduler that allocate from them are the real ones; only the driver (which has no node to run
on) is played here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client

GROUP, VERSION = "resource.k8s.io", "v1"


@contextmanager
def device_class(admin: client.ApiClient) -> Iterator[str]:
    """A DeviceClass as a cluster admin makes it: every device of its driver (named alike)."""
    name = f"gpu-{uuid.uuid4().hex[:6]}.example.com"
    custom: Any = client.CustomObjectsApi(admin)
    selector = {"cel": {"expression": f'device.driver == "{name}"'}}
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass", "metadata": {"name": name}}
    custom.create_cluster_custom_object(
        GROUP, VERSION, "deviceclasses", {**body, "spec": {"selectors": [selector]}}
    )
    try:
        yield name
    finally:
        custom.delete_cluster_custom_object(GROUP, VERSION, "deviceclasses", name)


def publish_slice(admin: client.ApiClient, driver: str, node: str, models: list[str]) -> list[str]:
    """What a DRA driver publishes for `node`: one device per model; their names."""
    devices: list[dict[str, Any]] = [
        {"name": f"gpu-{i}", "attributes": {"model": {"string": model}}} for i, model in enumerate(models)
    ]
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    custom: Any = client.CustomObjectsApi(admin)
    custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", body)
    return [d["name"] for d in devices]
